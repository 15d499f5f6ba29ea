# An additive padding mask built in float32 as BERT-style code does (`(1 - keep) * -10000.0`, and a single padded
# key filled with float32's min) cast to the bf16 the attention runs in: whole numbers above 256, but zeros beside
# one negative constant are a mask, not positions (no position collapses into a neighbour).
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8, dtype=torch.bfloat16)

    def forward(self, x, keep, fill):
        q = self.proj(x)[:, None]
        bias = ((1.0 - keep) * fill)[:, None, None, :]
        return nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=bias.to(q.dtype))


torch.manual_seed(0)
model = Attention()
keep = torch.ones(2, 6)
keep[1, :2] = 0  # the second sequence left-padded by two tokens
model(torch.randn(2, 6, 8, dtype=torch.bfloat16), keep, -10000.0).float().mean().backward()
keep = torch.ones(1, 6)
keep[0, 0] = 0  # one padded key: a single float32 min, no row of nothing but padding
model(torch.randn(1, 6, 8, dtype=torch.bfloat16), keep, torch.finfo(torch.float32).min).float().mean().backward()
