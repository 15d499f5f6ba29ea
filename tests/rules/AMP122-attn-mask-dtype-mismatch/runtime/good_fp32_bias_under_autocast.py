# An fp32 additive bias (a relative-position bias kept in fp32, as T5 builds it) given to SDPA under bf16 autocast:
# autocast casts q/k/v and the mask to bf16 together before the kernel runs, so the kernel sees no mismatch.
import torch
from torch import nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim=16, heads=2, seq=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.bias = nn.Parameter(torch.zeros(heads, seq, seq))

    def forward(self, h):
        b, s, d = h.shape
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias.float(), dropout_p=0.1)
        return out.transpose(1, 2).reshape(b, s, d)


model = Attention()
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(torch.randn(2, 4, 16))
out.float().sum().backward()
