# A module whose half option raises before its dtype is set: the fp16 assignment after the `raise` never runs, so the
# positions are built in the fp32 the working option sets.
import torch
from torch import nn


class Decay(nn.Module):
    def __init__(self, dim, precision="single"):
        super().__init__()
        if precision == "half":
            raise NotImplementedError("no half kernel for this yet")
            self.real_type = torch.float16
        elif precision == "single":
            self.real_type = torch.float32
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        positions = torch.arange(1, x.shape[1] + 1, dtype=self.real_type, device=x.device)
        return self.proj(x) * positions[None, :, None]
