# The bf16 branch needs precision=torch.bfloat16, and the one construction in the file passes torch.half: no run of
# this code takes the branch, so the casts in it round nothing.
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim, precision=torch.half):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.precision = precision

    def forward(self, x):
        t = torch.arange(x.shape[1], device=x.device, dtype=torch.float32)
        emb = torch.outer(t, self.inv_freq)
        cos_cached, sin_cached = emb.cos(), emb.sin()
        if self.precision == torch.bfloat16:
            cos_cached = cos_cached.bfloat16()
            sin_cached = sin_cached.bfloat16()
        return cos_cached, sin_cached


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.rotary = Rotary(dim, precision=torch.half)
