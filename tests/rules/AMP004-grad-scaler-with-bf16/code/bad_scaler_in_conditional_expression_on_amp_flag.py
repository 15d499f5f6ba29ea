# The conditional expression's test is an on/off flag that bf16 runs set too: the scaler is built for them.
import torch


class Stepper:
    def __init__(self, use_amp: bool, model, optimizer):
        self.use_amp = use_amp
        self.ctx = torch.autocast("cuda", enabled=use_amp, dtype=torch.bfloat16)
        self.scaler = torch.cuda.amp.GradScaler() if self.use_amp else None  # ampdoctor: expect[AMP004]
        self.model, self.optimizer = model, optimizer

    def step(self, batch):
        with self.ctx:
            loss = self.model(batch)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
