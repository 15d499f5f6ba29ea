# huggingface/transformers#25681 ("with deepspeed it will always cast"): `model.to(bf16)` casts the `inv_freq`
# buffer too, so positions and angles are bf16 and cos/sin are computed from angles far beyond 256.
# ampdoctor: expect-anywhere[AMP002]
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)

    def forward(self, seq_len):
        t = torch.arange(seq_len).type_as(self.inv_freq)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos()  # ampdoctor: expect[AMP002]
        sin = emb.sin()  # ampdoctor: expect[AMP002]
        return cos, sin


class Attention(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.rotary = RotaryEmbedding(dim)
        self.q = nn.Linear(dim, dim)

    def forward(self, x):
        cos, sin = self.rotary(x.shape[0])
        q = self.q(x)
        q1, q2 = q.chunk(2, dim=-1)
        return q * cos + torch.cat((-q2, q1), dim=-1) * sin


model = Attention().to(torch.bfloat16)  # what DeepSpeed's bf16 engine does to the module
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(1024, 8, dtype=torch.bfloat16)
model(x).float().pow(2).mean().backward()
optimizer.step()
