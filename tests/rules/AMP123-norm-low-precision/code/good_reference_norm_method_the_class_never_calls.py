# An fp16 inference engine's RMSNorm runs a fused kernel in its forward; the reference `_norm` beside it, which would
# square fp16 inputs, is never called by anything in the file.
import torch
from torch import nn

import fused_ops


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        out = torch.empty_like(x)
        fused_ops.rms_norm(x, self.weight, out, self.eps)
        return out


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = RMSNorm(dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return x + self.proj(self.norm(x))


def build(dim):
    return Block(dim).half().cuda()
