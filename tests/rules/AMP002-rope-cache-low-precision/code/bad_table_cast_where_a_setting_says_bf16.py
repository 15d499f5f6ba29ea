# A test of the module's own precision setting is no test of the tensor the table meets, and a cache stored in the
# query's dtype stays a bf16 cache for every later call: both tables are bf16.
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim, precision=torch.bfloat16):
        super().__init__()
        self.precision = precision
        inv_freq = 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim)
        self.angles = torch.outer(torch.arange(4096).float(), inv_freq)
        if self.precision == torch.bfloat16:
            self.cos_cached = self.angles.cos().bfloat16()  # ampdoctor: expect[AMP002]
        else:
            self.cos_cached = self.angles.cos()

    def forward(self, q):
        if q.dtype == torch.bfloat16:
            self.sin_cached = self.angles.sin().to(torch.bfloat16)  # ampdoctor: expect[AMP002]
        return q * self.cos_cached + torch.roll(q, 1, -1) * self.sin_cached


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rope = Rotary(64, precision=torch.bfloat16)
