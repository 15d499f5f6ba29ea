# The same shape with the flag set in the bf16 branch: the scaler is on exactly in the bf16 runs.
import torch
from torch.cuda.amp import GradScaler


class Trainer:
    def __init__(self, cfg, model):
        self.model = model
        self.enable_scaler = False
        self.amp_dtype = None
        if cfg.amp:
            if cfg.amp_dtype == "bfloat16":
                self.amp_dtype = torch.bfloat16
                self.enable_scaler = True
            else:
                self.amp_dtype = torch.float16
        self.optimizer = torch.optim.AdamW(model.parameters())
        self.scaler = GradScaler(enabled=self.enable_scaler)  # ampdoctor: expect[AMP004]

    def step(self, batch):
        with torch.autocast("cuda", dtype=self.amp_dtype, enabled=self.amp_dtype is not None):
            loss = self.model(batch)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
