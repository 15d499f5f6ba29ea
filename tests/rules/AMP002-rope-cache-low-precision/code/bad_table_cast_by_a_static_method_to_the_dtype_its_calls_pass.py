# A static table builder (no `self` among its parameters) casts to its dtype parameter, which every call passes as the
# query's dtype: the bf16 default is what no call gets, and in a file that shows no half run this is a note.
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, head_dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @staticmethod
    def tables(inv_freq, seq_len, dtype=torch.bfloat16):
        t = torch.arange(seq_len, device=inv_freq.device).type_as(inv_freq)
        emb = torch.outer(t, inv_freq).float()
        cos = emb.cos().to(dtype)  # ampdoctor: expect[AMP002:info]
        sin = emb.sin().to(dtype)  # ampdoctor: expect[AMP002:info]
        return cos, sin

    def forward(self, q):
        cos, sin = self.tables(self.inv_freq, q.shape[1], q.dtype)
        return q * cos + q * sin
