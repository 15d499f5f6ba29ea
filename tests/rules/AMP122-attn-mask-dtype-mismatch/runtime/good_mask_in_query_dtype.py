# The fix for huggingface/trl#1460 (foundation-model-stack PR #215): the additive mask is built in the queries'
# dtype (a bool mask works too).
import torch
from torch import nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, h, padding):
        b, s, d = h.shape
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        mask = (1.0 - padding[:, None, None, :].to(q.dtype)) * torch.finfo(q.dtype).min
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        keep = padding[:, None, None, :].bool()
        out2 = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        return (out + out2).transpose(1, 2).reshape(b, s, d)


model = Attention()
padding = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
model(torch.randn(2, 4, 16), padding).sum().backward()
