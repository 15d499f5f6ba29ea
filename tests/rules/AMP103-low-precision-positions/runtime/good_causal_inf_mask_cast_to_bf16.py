# An additive causal mask of 0 and -inf cast to bf16 in a forward: whole numbers, but no positions (a position is
# finite), and the cast keeps every value as it was.
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8, dtype=torch.bfloat16)

    def forward(self, x):
        q = self.proj(x)[:, None]
        causal = torch.full((1, 1, q.shape[-2], q.shape[-2]), float("-inf")).triu(1)
        return nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=causal.to(q.dtype))


torch.manual_seed(0)
model = Attention()
model(torch.randn(1, 200, 8, dtype=torch.bfloat16)).float().mean().backward()
