# huggingface/transformers PR #18057 (XGLM fp16 NaNs): the model is cast to half precision without autocast, so the
# attention softmax gets half scores; the fix passes `dtype=torch.float32`. torch reduces a half softmax in fp32 and
# rounds once, so this is a note: the rounding of the probabilities is all that differs.
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
        weights = F.softmax(scores, dim=-1)  # ampdoctor: expect[AMP124:info]
        return self.out((weights @ v).transpose(1, 2).reshape(bsz, seq, width))


net = SelfAttention().to(torch.bfloat16)
