# The fix of transformers PR #17306: fill with the smallest value of the tensor's own dtype; a constant that the
# dtype holds (-1e4 in fp16, -1e9 in bf16) is fine too, and so is -1e9 in an fp32 tensor.
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1)
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        return scores.softmax(-1) @ v


model = Attention(64).cuda().half()


def padding_bias(lengths, width):
    bias = torch.zeros(len(lengths), width, dtype=torch.float16)
    return torch.where(lengths[:, None] > torch.arange(width), bias, -1e4)


def causal_bias_bf16(n):
    return torch.full((n, n), -1e9, dtype=torch.bfloat16).triu(1)


def causal_bias_fp32(n):
    bias = torch.zeros(n, n, dtype=torch.float32)
    return bias.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), torch.finfo(torch.float32).min)
