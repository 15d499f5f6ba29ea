# The same attention trained under bf16 autocast with fp32 weights: autocast runs softmax in fp32 on CUDA
# (huggingface/transformers PR #18057 only bites a model cast without autocast).
import math

import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.to_qkv = nn.Linear(width, 3 * width)

    def forward(self, h):
        q, k, v = self.to_qkv(h).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        return F.softmax(scores, dim=-1) @ v


net = SelfAttention().cuda()
x = torch.randn(2, 8, 64, device="cuda")
with torch.autocast("cuda", dtype=torch.bfloat16):
    y = net(x)
