# A model file that fixes no precision: its attention scores are a matmul product, so fp16 autocast (the user's
# choice, made in some other script) computes them in fp16, and masked_fill of -1e10 raises there. A note: nothing
# here says the model is ever run so.
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, block):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.register_buffer("mask", torch.tril(torch.ones(block, block)))

    def forward(self, x):
        t = x.size(1)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:t, :t] == 0, -1e10)  # ampdoctor: expect[AMP133:info]
        return att.softmax(-1) @ v
