# The half dtype enters before the table is named: the exponent range that the frequencies are computed from is made
# in bf16, or the angles are cast to fp16 and the cos/sin cache is taken of them afterwards.
import torch
from torch import nn


class RotaryFromHalfExponents(nn.Module):
    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.bfloat16) / head_dim)  # ampdoctor: expect[AMP002]
        self.register_buffer("inv_freq", inv_freq, persistent=False)


class RotaryFromHalfAngles(nn.Module):
    def __init__(self, head_dim: int, max_len: int = 4096, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(max_len).float(), inv_freq)
        emb = torch.cat((angles, angles), dim=-1).half()  # ampdoctor: expect[AMP002]
        self.cos_cached = emb.cos()[None, None]
        self.sin_cached = emb.sin()[None, None]
