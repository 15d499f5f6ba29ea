# An fp32 bias into SDPA in a model run under autocast: autocast casts the mask with q/k/v.
import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, keep):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        bias = torch.zeros(keep.shape, device=x.device).masked_fill(~keep, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)


model = SelfAttention(256).cuda()
with torch.autocast("cuda", dtype=torch.bfloat16):
    out = model(torch.randn(2, 8, 256, device="cuda"), torch.ones(2, 8, dtype=torch.bool, device="cuda"))
