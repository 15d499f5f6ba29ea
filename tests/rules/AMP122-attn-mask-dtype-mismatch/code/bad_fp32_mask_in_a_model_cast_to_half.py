# A padding bias built in fp32 (a factory without dtype, filled with -inf) handed to SDPA in a model the file runs in
# bf16 without autocast: SDPA refuses a float mask of another dtype than the query.
import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, keep):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        bias = torch.zeros(b, 1, 1, n, device=x.device)
        bias = bias.masked_fill(~keep[:, None, None, :], float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)  # ampdoctor: expect[AMP122:warning]

    def cross(self, x, memory, keep):
        q = self.qkv(x)[..., : x.shape[-1]]
        bias = (1.0 - keep[:, None, :].float()) * -10000.0
        return F.scaled_dot_product_attention(q, memory, memory, bias)  # ampdoctor: expect[AMP122:warning]


model = SelfAttention(256, 4).to(torch.bfloat16)
