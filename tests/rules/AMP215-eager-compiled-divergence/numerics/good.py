"""The same module without the cancellation: eager and compiled round the same values, and differ by at most the
rounding of the output."""
# ampdoctor: policy=bf16-mixed
# ampdoctor: compiled
import torch
from torch import nn


class Squash(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 0.5 + 0.5


def factory():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 16), Squash(), nn.Linear(16, 4)), (torch.randn(8, 16),)
