"""An offset added and taken away again around a nonlinearity: eager rounds `x + offset` to bf16 (spacing 2 at 256)
and loses the signal; inductor fuses the chain and keeps the sum in fp32, so the compiled module gives other numbers."""
# ampdoctor: policy=bf16-mixed
# ampdoctor: compiled
# ampdoctor: expect-anywhere[AMP215]
import torch
from torch import nn


class Recentred(nn.Module):
    def __init__(self, offset):
        super().__init__()
        self.offset = offset

    def forward(self, x):
        return torch.tanh((x + self.offset) - self.offset)


def factory():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 16), Recentred(256.0), nn.Linear(16, 4)), (torch.randn(8, 16),)
