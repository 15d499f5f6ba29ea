# The fix of KellerJordan/modded-nanogpt#39 / transformers PR #29285: fp32 weights and rotary tables, bf16 autocast
# for the matmuls, angles and cos/sin built in fp32 with autocast off and cast to the activations' dtype at use.
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, seq_len):
        with torch.autocast("cpu", enabled=False):
            t = torch.arange(seq_len, dtype=torch.float32)
            freqs = torch.outer(t, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos(), emb.sin()


class Attention(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.rotary = RotaryEmbedding(dim)
        self.q = nn.Linear(dim, dim)

    def forward(self, x):
        cos, sin = self.rotary(x.shape[0])
        q = self.q(x)
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        q1, q2 = q.chunk(2, dim=-1)
        return q * cos + torch.cat((-q2, q1), dim=-1) * sin


model = Attention()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(1024, 8)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(x)
out.float().pow(2).mean().backward()
optimizer.step()
