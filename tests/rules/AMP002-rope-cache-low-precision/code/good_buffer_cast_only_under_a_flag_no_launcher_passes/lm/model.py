import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        inv_freq = 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # ampdoctor: expect[AMP002:info]

    def forward(self, x, position_ids):
        freqs = position_ids[..., None].type_as(self.inv_freq) * self.inv_freq
        return freqs.cos(), freqs.sin()


class TinyLM(nn.Module):
    def __init__(self, dim: int = 64):
        super().__init__()
        self.rotary = Rotary(dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, position_ids):
        cos, sin = self.rotary(x, position_ids)
        return self.proj(x * cos + x * sin)
