# The fix of bad_table_computed_from_half_values.py: exponents and angles are fp32, and only a consumer casts what
# it reads. A half value that meets an fp32 tensor on the way is promoted, and a half activation named otherwise is
# no table.
import torch
from torch import nn


class RotaryFromFp32Exponents(nn.Module):
    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)


class RotaryFromFp32Angles(nn.Module):
    def __init__(self, head_dim: int, max_len: int = 4096, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
        self.inv_freq = inv_freq
        angles = torch.outer(torch.arange(max_len).float(), inv_freq)
        emb = torch.cat((angles, angles), dim=-1)
        self.cos_cached = emb.cos()[None, None]
        self.sin_cached = emb.sin()[None, None]

    def forward(self, x):
        steps = torch.arange(x.shape[1], device=x.device, dtype=torch.bfloat16)
        freqs = steps[:, None] * self.inv_freq[None, :]
        hidden = x.to(torch.bfloat16) * 0.5
        return freqs, hidden
