# The same kinds of fill where no fp16 run is possible or nothing overflows: a file that runs in bf16 (which holds
# -1e10), a fill of the scores' own dtype minimum, and a fill of a tensor that is neither a matmul product nor in a
# file or project that runs fp16.
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = q @ k.transpose(-2, -1)
        att = att.masked_fill(mask, -1e10)
        other = att.masked_fill(mask, torch.finfo(att.dtype).min)
        return (att + other).softmax(-1) @ v


def masked_max(vector, mask, dim, fill=-1e7):
    return vector.masked_fill(~mask, fill).max(dim=dim)[0]


model = Attention(64).to(torch.bfloat16)
