# The same backbone taking its fused kernel from a star import: the file's text does not show every name it binds,
# so `FusedSelfAttention` may well be defined, the fp16 branch may run, and the channel LayerNorm is reported.
import torch
from torch import nn
import torch.nn.functional as F

from .kernels import *  # FusedSelfAttention, among others


class ChannelLayerNorm(nn.Module):
    def __init__(self, channels, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.eps = eps

    def forward(self, x):
        mu = x.mean(1, keepdim=True)
        var = (x - mu).pow(2).mean(1, keepdim=True)  # ampdoctor: expect[AMP123:warning]
        x = (x - mu) / torch.sqrt(var + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class Attention(nn.Module):
    def __init__(self, dim, heads, fused=False):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.fused = fused
        if fused:
            kernel_kwargs = {"device": "cuda", "dtype": torch.float16}
            self.kernel = FusedSelfAttention(dropout=0.0, **kernel_kwargs)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return F.scaled_dot_product_attention(q, k, v)
