# The same causal masks kept where a cast of the module reaches them (a buffer), cast to the scores' dtype where they
# are used, or boolean: none is fixed apart from the model's dtype.
import math

import torch
import torch.nn.functional as F
from torch import nn


class BufferedAttention(nn.Module):
    def __init__(self, width, context):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.register_buffer("future", torch.triu(torch.full((context, context), float("-inf")), diagonal=1), persistent=False)

    def forward(self, x):
        _, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(width)
        scores = scores + self.future[:length, :length]
        return F.softmax(scores, dim=-1) @ v


class CastAttention(nn.Module):
    def __init__(self, width, context):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.future = torch.triu(torch.full((context, context), float("-inf")), diagonal=1)
        self.allowed = torch.ones(context, context, dtype=torch.bool).tril()

    def forward(self, x):
        _, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(width)
        scores = scores + self.future[:length, :length].to(device=x.device, dtype=scores.dtype)
        out = F.softmax(scores, dim=-1) @ v
        return out + F.scaled_dot_product_attention(q, k, v, attn_mask=self.allowed[:length, :length])
