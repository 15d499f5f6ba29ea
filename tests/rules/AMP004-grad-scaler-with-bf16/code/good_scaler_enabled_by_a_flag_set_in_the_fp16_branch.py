# The flag that enables the scaler starts False and is set True only in the branch fp16 runs take: bf16 runs get a
# disabled scaler, however the attribute is named.
import torch
from torch.cuda.amp import GradScaler


class Trainer:
    def __init__(self, cfg, model):
        self.model = model
        self.enable_scaler = False
        self.amp_dtype = None
        if cfg.amp:
            if cfg.amp_dtype == "float16" or cfg.amp_dtype == "fp16":
                self.amp_dtype = torch.float16
                self.enable_scaler = True
            elif cfg.amp_dtype == "bfloat16":
                self.amp_dtype = torch.bfloat16
        self.optimizer = torch.optim.AdamW(model.parameters())
        self.scaler = GradScaler(enabled=self.enable_scaler)

    def step(self, batch):
        with torch.autocast("cuda", dtype=self.amp_dtype, enabled=self.amp_dtype is not None):
            loss = self.model(batch)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
