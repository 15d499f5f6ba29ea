# Under the trainer's bf16 autocast: the scores are upcast before float32's minimum is written into them, and -1e9,
# which bf16 holds, is written into the bf16 product as it is.
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = (q @ k.transpose(-2, -1)).float()
        scores = scores.masked_fill(mask, torch.finfo(torch.float32).min)
        return scores.softmax(-1).type_as(v) @ v

    def forward_half(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1)
        scores = scores.masked_fill(mask, -1e9)
        return scores.softmax(-1) @ v
