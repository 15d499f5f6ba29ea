# The fix of huggingface/transformers PR #18057: the attention softmax of a half model runs in fp32 and its
# probabilities are cast back to the activations' dtype.
import math

import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, width=64, n_heads=4):
        super().__init__()
        self.n_heads = n_heads
        self.to_qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, h):
        bsz, seq, width = h.shape
        heads = [z.view(bsz, seq, self.n_heads, -1).transpose(1, 2) for z in self.to_qkv(h).chunk(3, dim=-1)]
        q, k, v = heads
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        return self.out((weights @ v).transpose(1, 2).reshape(bsz, seq, width))


net = SelfAttention().to(torch.bfloat16)
