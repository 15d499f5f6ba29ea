# Masks SDPA takes in a model run in bf16: a bool mask, a bias cast to the query's dtype, a bias made in it, or an fp32
# bias beside queries cast to fp32 too.
import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, keep):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])
        bias = torch.zeros(keep.shape, device=x.device).masked_fill(~keep, float("-inf"))
        out = out + F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
        made = torch.zeros(keep.shape, dtype=q.dtype, device=x.device)
        out = out + F.scaled_dot_product_attention(q, k, v, attn_mask=made)
        return out + F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=bias)


model = SelfAttention(256, 4).to(torch.bfloat16)
