# A causal mask built once in `__init__` and kept as a plain attribute, not a buffer: casting the module to half
# casts its parameters and buffers, never its plain tensors, so the mask stays in the default float32 whatever the
# model runs in, and added to half scores it promotes them (the product with the values then fails).
import math

import torch
import torch.nn.functional as F
from torch import nn


class CausalAttention(nn.Module):
    def __init__(self, width, context):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.future = torch.triu(torch.full((context, context), float("-inf")), diagonal=1)  # ampdoctor: expect[AMP122:info]

    def forward(self, x):
        _, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(width)
        scores = scores + self.future[:length, :length].to(x.device)
        return F.softmax(scores, dim=-1) @ v
