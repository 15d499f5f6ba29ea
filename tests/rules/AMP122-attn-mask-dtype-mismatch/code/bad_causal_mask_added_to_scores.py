# A hand-written causal attention that makes its mask at every call with `torch.full` (no dtype: float32) and adds it
# to the scores: in a model run in fp16 or bf16 without autocast the sum is promoted to fp32, and the product of the
# fp32 probabilities with the half values fails ("expected scalar type Half but found Float").
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        future = torch.full((t, t), float("-inf"), device=x.device)  # ampdoctor: expect[AMP122:info]
        scores += torch.triu(future, diagonal=1)
        probs = scores.softmax(dim=-1)
        return self.out((probs @ v).transpose(1, 2).reshape(b, t, c))
