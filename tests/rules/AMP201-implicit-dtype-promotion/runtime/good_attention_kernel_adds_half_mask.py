# Attention with dropout under bf16 autocast, given an additive mask: CPU's SDPA takes its math path, which upcasts
# the bf16 q/k/v to fp32 itself and adds the bf16 mask (autocast cast it) to its fp32 scores. That promotion, feeding
# the kernel's own fp32 bmm, is the kernel's choice, not the caller's.
# ampdoctor: policy=bf16-mixed
import torch
from torch import nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, h, mask):
        b, s, d = h.shape
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.1)
        return out.transpose(1, 2).reshape(b, s, d)


model = Attention()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
mask = torch.zeros(4, 4).masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), -1e4)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(torch.randn(2, 4, 16), mask)
out.float().sum().backward()
optimizer.step()
