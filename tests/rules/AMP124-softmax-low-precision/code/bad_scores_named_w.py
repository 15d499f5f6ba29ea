# The attention scores of a half model under any name: `w = q @ k.T` feeds the softmax as `scores` does in
# bad_attention_softmax_in_bf16.py (transformers PR #18057): the matmul result, not the variable name, makes it attention.
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
        w = q @ k.transpose(-2, -1)
        w = w / math.sqrt(q.size(-1))
        p = F.softmax(w, dim=-1)  # ampdoctor: expect[AMP124:info]
        return self.out((p @ v).transpose(1, 2).reshape(bsz, seq, width))


net = SelfAttention().to(torch.bfloat16)
