# The `nn.Buffer` tables are cast with the model, but forward rebuilds them in fp32 whenever they are not fp32 (after
# the cast) or too short, so the rotation never reads a bf16 table.
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim: int, max_seq_len: int):
        super().__init__()
        self.inv_freq_values = (1 / 1024) ** torch.linspace(0, 1, steps=dim // 2, dtype=torch.float32)
        self.cos = nn.Buffer(torch.empty(0), persistent=False)
        self.sin = nn.Buffer(torch.empty(0), persistent=False)
        self._build(max_seq_len)

    def _build(self, length: int):
        theta = torch.outer(torch.arange(length, dtype=torch.float32), self.inv_freq_values)
        self.cos = theta.cos()
        self.sin = theta.sin()

    def forward(self, x):
        if self.cos.dtype != torch.float32 or self.cos.size(0) < x.size(-3):
            self._build(max(x.size(-3), self.cos.size(0)))
        cos, sin = self.cos[None, : x.size(-3), None, :], self.sin[None, : x.size(-3), None, :]
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat((x1 * cos + x2 * sin, x2 * cos - x1 * sin), 3).type_as(x)


class TinyLM(nn.Module):
    def __init__(self, dim: int = 64):
        super().__init__()
        self.rotary = Rotary(dim, 1024)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(self.rotary(x).flatten(-2))


model = TinyLM().bfloat16()
