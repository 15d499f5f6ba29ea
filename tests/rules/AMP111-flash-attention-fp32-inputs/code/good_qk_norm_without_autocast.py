# The model is cast to bf16 and runs without autocast: a norm returns its input's dtype, so q, k and v reach
# flash-attn in bf16 alike.
import torch
from flash_attn import flash_attn_func
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.norm_q = nn.RMSNorm(dim // heads)
        self.norm_k = nn.RMSNorm(dim // heads)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = self.norm_q(q.unflatten(-1, (self.heads, -1)))
        k = self.norm_k(k.unflatten(-1, (self.heads, -1)))
        v = v.unflatten(-1, (self.heads, -1))
        return flash_attn_func(q, k, v, causal=True).flatten(-2)


model = Attention(64, 4).to(torch.bfloat16)
