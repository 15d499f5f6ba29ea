# huggingface/trl#1460 from the other side: the model is cast to bf16 but the additive padding mask is built in
# fp32. CUDA's SDPA refuses it ("Expected attn_mask dtype to be bool or to match query dtype"); the CPU kernel also
# accepts float masks and runs, and the audit still sees the mask dtype differ from the queries'.
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


model = Attention().to(torch.bfloat16)
padding = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
mask = (1.0 - padding[:, None, None, :].float()) * torch.finfo(torch.float32).min
model(torch.randn(2, 4, 16, dtype=torch.bfloat16), mask).float().sum().backward()
