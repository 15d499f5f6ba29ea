# huggingface/transformers PR #18057 (XGLM fp16 NaNs): the model is cast to half precision without autocast, so the
# attention softmax runs in the half dtype; the fix passes `dtype=torch.float32`.
import math

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att, dim=-1)  # ampdoctor: expect[AMP124]
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(b, t, c))


model = CausalSelfAttention().to(torch.bfloat16)
