# The fixes of EleutherAI/gpt-neox#1305 and huggingface/transformers PR #38453: the fp32 tables are cast to the
# activations' dtype where they meet them, so the rotation sees one dtype.
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(64, dtype=torch.float32)
        emb = torch.cat((torch.outer(t, inv_freq),) * 2, dim=-1)
        self.cos_cached = emb.cos()
        self.sin_cached = emb.sin()

    def forward(self, seq_len, dtype):
        return self.cos_cached[:seq_len].to(dtype), self.sin_cached[:seq_len].to(dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.rotary = RotaryEmbedding(dim)
        self.q = nn.Linear(dim, dim)

    def forward(self, h):
        q = self.q(h)
        cos, sin = self.rotary(h.shape[0], q.dtype)
        return q * cos + rotate_half(q) * sin


model = Attention().to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
model(torch.randn(32, 16, dtype=torch.bfloat16)).float().pow(2).mean().backward()
optimizer.step()
