# The same RMSNorm used as a q/k norm: its inputs are the heads of a linear projection, which fp16 autocast computes
# in fp16, so the squares are fp16 and overflow past |x| = 256.
import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        var = (x * x).mean(-1, keepdim=True)  # ampdoctor: expect[AMP123:warning]
        return x * torch.rsqrt(var + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.q_norm = RMSNorm(dim // heads)
        self.k_norm = RMSNorm(dim // heads)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).transpose(1, 3).unbind(2)
        q, k = self.q_norm(q), self.k_norm(k)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 256, dim: int = 64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.attn = Attention(dim, 4)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        h = self.embed(idx)
        h = h + self.attn(h)
        return self.head(h)
