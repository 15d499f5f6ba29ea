# The table builder takes its dtype as a parameter whose default is bf16; the one call passes the query's dtype, and
# the trainer of this project runs the model under bf16 autocast: the cached cos/sin are bf16 in its runs.
import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Rotary(nn.Module):
    def __init__(self, head_dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.seq_len_cached = None

    def tables(self, seq_len, device, dtype=torch.bfloat16):
        if seq_len != self.seq_len_cached:
            self.seq_len_cached = seq_len
            t = torch.arange(seq_len, device=device).type_as(self.inv_freq)
            freqs = torch.outer(t, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1).float()
            self.cos_cached = emb.cos()[None, :, :]
            self.sin_cached = emb.sin()[None, :, :]
            self.cos_cached = self.cos_cached.type(dtype)  # ampdoctor: expect[AMP002:warning]
            self.sin_cached = self.sin_cached.type(dtype)  # ampdoctor: expect[AMP002:warning]
        return self.cos_cached, self.sin_cached

    def forward(self, q, k):
        cos, sin = self.tables(q.shape[1], q.device, q.dtype)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qk = nn.Linear(dim, 2 * dim)
        self.rotary = Rotary(dim)

    def forward(self, x):
        q, k = self.qk(x).chunk(2, dim=-1)
        q, k = self.rotary(q, k)
        return q @ k.transpose(-1, -2)
