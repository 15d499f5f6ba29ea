import torch
from torch import nn


class SimpleLayerNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) * (x - mean)).mean(-1, keepdim=True)  # ampdoctor: expect[AMP123]
        return (x - mean) / (var + self.eps).sqrt() * self.weight


class TinyLM(nn.Module):
    def __init__(self, dim: int = 64):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.norm = SimpleLayerNorm(dim)

    def forward(self, x):
        return self.norm(self.proj(x))
