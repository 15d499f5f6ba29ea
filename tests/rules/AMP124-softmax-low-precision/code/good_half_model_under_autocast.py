# The same attention trained under bf16 autocast with fp32 weights: autocast runs softmax in fp32 on CUDA
# (huggingface/transformers PR #18057 only bites a model cast without autocast).
import math

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        return F.softmax(att, dim=-1) @ v


model = CausalSelfAttention()
x = torch.randn(2, 8, 64, device="cuda", dtype=torch.bfloat16)
with torch.autocast("cuda", dtype=torch.bfloat16):
    y = model(x)
