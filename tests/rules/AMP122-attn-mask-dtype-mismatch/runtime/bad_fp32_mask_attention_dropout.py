# The fp32 padding mask of bad_fp32_mask_bf16_queries.py, in training with attention dropout: CPU's SDPA then takes its
# math path, which casts q/k/v and the mask to fp32 itself, so no op it runs shows the mismatch. The call does: its
# caller gave it bf16 queries and an fp32 mask (which CUDA's kernels refuse).
import torch
from torch import nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, h, attention_mask):
        b, s, d = h.shape
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask, dropout_p=0.1)  # ampdoctor: expect[AMP122]
        return out.transpose(1, 2).reshape(b, s, d)


model = Attention().to(torch.bfloat16)
padding = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
mask = (1.0 - padding[:, None, None, :].float()) * torch.finfo(torch.float32).min
model(torch.randn(2, 4, 16, dtype=torch.bfloat16), mask).float().sum().backward()
