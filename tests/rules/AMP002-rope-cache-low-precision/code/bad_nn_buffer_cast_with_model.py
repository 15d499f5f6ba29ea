# torch 2.5's `nn.Buffer` registers the tables as buffers, so the model's `.bfloat16()` casts them with the weights.
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim: int, max_seq_len: int):
        super().__init__()
        inv_freq = (1 / 1024) ** torch.linspace(0, 1, steps=dim // 2, dtype=torch.float32)
        theta = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)
        self.cos = nn.Buffer(theta.cos(), persistent=False)  # ampdoctor: expect[AMP002:warning]
        self.sin = nn.Buffer(theta.sin(), persistent=False)  # ampdoctor: expect[AMP002:warning]

    def forward(self, x):
        cos, sin = self.cos[None, : x.size(-3), None, :], self.sin[None, : x.size(-3), None, :]
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos + x2 * sin, x2 * cos - x1 * sin), 3)


class TinyLM(nn.Module):
    def __init__(self, dim: int = 64):
        super().__init__()
        self.rotary = Rotary(dim, 1024)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(self.rotary(x).flatten(-2))


model = TinyLM().bfloat16()
