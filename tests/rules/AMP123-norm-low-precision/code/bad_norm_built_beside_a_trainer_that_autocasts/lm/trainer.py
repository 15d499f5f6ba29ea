# The trainer's step runs under autocast in the dtype the run configures (bf16 or fp16; autocast computes in one of
# them whenever it is on).
import torch


class Trainer:
    def __init__(self, model, optimizer, dtype):
        self.model, self.optimizer, self.dtype = model, optimizer, dtype

    def fit(self, loader):
        for x in loader:
            with torch.autocast("cuda", dtype=self.dtype):
                loss = self.model(x).float().square().mean()
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
