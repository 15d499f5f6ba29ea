# huggingface/trl#1460: accelerate's bf16 setup built the additive attention mask in bf16 while the model (and so
# the queries) stayed fp32: "Expected attn_mask dtype to be bool or to match query dtype, but got
# attn_mask.dtype: c10::BFloat16 and query.dtype: float instead."
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
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask)  # ampdoctor: expect[AMP122]
        return out.transpose(1, 2).reshape(b, s, d)


model = Attention()
padding = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
mask = (1.0 - padding[:, None, None, :].to(torch.bfloat16)) * torch.finfo(torch.bfloat16).min
model(torch.randn(2, 4, 16), mask).sum().backward()
