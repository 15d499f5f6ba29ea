# The same model, whose forward rotates an fp32 copy of its input: the bf16 tables promote, the products run in
# fp32, and only the result is rounded back to the input's dtype. The tables are read through `.float()`.
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim: int, max_len: int):
        super().__init__()
        freqs = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32), freqs)
        self.cos = nn.Buffer(angles.cos(), persistent=False)
        self.sin = nn.Buffer(angles.sin(), persistent=False)

    def forward(self, q):
        n = q.size(1)
        c, s = self.cos.float()[None, :n, None, :], self.sin.float()[None, :n, None, :]
        a, b = q.to(dtype=torch.float32).chunk(2, dim=-1)
        return torch.cat((a * c - b * s, a * s + b * c), dim=-1).type_as(q)


class Block(nn.Module):
    def __init__(self, width: int = 128, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.rope = RotaryEmbedding(width // heads, 2048)
        self.qkv = nn.Linear(width, 3 * width)

    def forward(self, h):
        q, k, v = self.qkv(h).unflatten(-1, (3, self.heads, -1)).unbind(2)
        return self.rope(q), self.rope(k), v


net = Block().cuda().bfloat16()
