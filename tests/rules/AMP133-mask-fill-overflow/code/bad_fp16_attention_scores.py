# fairseq #3575 / transformers PR #17306: a causal mask filled with -1e9 in a model run in fp16; fp16 holds at most
# 65504, so masked_fill raises "value cannot be converted to type c10::Half without overflow".
import torch
from torch import nn

NEG = -1e9


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1)
        scores = scores.masked_fill(mask, NEG)  # ampdoctor: expect[AMP133]
        return scores.softmax(-1) @ v


model = Attention(64).cuda().half()


def padding_bias(lengths, width):
    bias = torch.zeros(len(lengths), width, dtype=torch.float16)
    return torch.where(lengths[:, None] > torch.arange(width), bias, -1e9)  # ampdoctor: expect[AMP133:warning]


def causal_bias(n):
    # finfo(float32).min is beyond bf16's range too: bf16's largest value is 3.39e38, float32's 3.40e38
    return torch.full((n, n), torch.finfo(torch.float32).min, dtype=torch.bfloat16).triu(1)  # ampdoctor: expect[AMP133]
