# The rotary tables are fp32 buffers, but the model's `.bfloat16()` casts them with the weights, and the forward
# casts its input to bf16 before rotating it: both operands of every product are bf16, so the rotation runs in bf16.
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim: int, max_len: int):
        super().__init__()
        freqs = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32), freqs)
        self.cos = nn.Buffer(angles.cos(), persistent=False)  # ampdoctor: expect[AMP002]
        self.sin = nn.Buffer(angles.sin(), persistent=False)  # ampdoctor: expect[AMP002]

    def forward(self, q):
        n = q.size(1)
        c, s = self.cos[None, :n, None, :], self.sin[None, :n, None, :]
        a, b = q.to(dtype=torch.bfloat16).chunk(2, dim=-1)  # ampdoctor: expect[AMP002]
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
