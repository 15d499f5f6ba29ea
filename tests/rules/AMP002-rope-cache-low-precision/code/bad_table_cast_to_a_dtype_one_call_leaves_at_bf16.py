# The table builder's dtype parameter defaults to bf16, and one of its two calls leaves it there: that call's tables
# are bf16, whatever the other call passes.
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, head_dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def tables(self, seq_len, device, dtype=torch.bfloat16):
        t = torch.arange(seq_len, device=device).type_as(self.inv_freq)
        emb = torch.outer(t, self.inv_freq).float()
        self.cos_cached = emb.cos().type(dtype)  # ampdoctor: expect[AMP002:warning]
        self.sin_cached = emb.sin().type(dtype)  # ampdoctor: expect[AMP002:warning]
        return self.cos_cached, self.sin_cached

    def forward(self, q):
        cos, sin = self.tables(q.shape[1], q.device, q.dtype)
        return q * cos + q * sin

    def warm_up(self, seq_len):
        return self.tables(seq_len, "cuda")
