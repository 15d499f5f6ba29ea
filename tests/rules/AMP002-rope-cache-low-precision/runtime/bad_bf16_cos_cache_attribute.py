# KellerJordan/modded-nanogpt#39 (incident 2): the cos/sin cache is a bf16 tensor attribute of the rotary module.
# The audit finds it by scanning the module (no source line: it is a tensor of the module).
# ampdoctor: expect-anywhere[AMP002]
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.seq_len_cached = None

    def forward(self, x):
        seq_len = x.shape[1]
        if seq_len != self.seq_len_cached:
            self.seq_len_cached = seq_len
            t = torch.arange(seq_len).float()
            freqs = torch.outer(t, self.inv_freq)
            self.cos_cached = freqs.cos().bfloat16()
            self.sin_cached = freqs.sin().bfloat16()
        return self.cos_cached[None, :, :], self.sin_cached[None, :, :]


class Block(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.rotary = Rotary(dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        cos, sin = self.rotary(x)
        x1, x2 = x.chunk(2, dim=-1)
        return self.proj(torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1))


model = Block().bfloat16()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(2, 32, 16, dtype=torch.bfloat16)
model(x).float().pow(2).mean().backward()
optimizer.step()
