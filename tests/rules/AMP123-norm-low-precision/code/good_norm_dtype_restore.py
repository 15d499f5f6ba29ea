# A layer library whose only mention of half precision handles what its caller passes: a batch norm that tests its
# input for fp16, reduces in fp32 and casts the result back to the input's dtype. That says nothing of the precision
# the channel LayerNorm below runs in (under CUDA autocast its `pow` runs in fp32), so there is no half evidence.
import torch
from torch import nn


class SyncStatsBatchNorm(nn.BatchNorm2d):
    def forward(self, input):
        half_input = input.dtype == torch.float16
        if half_input:
            input = input.float()
        out = super().forward(input)
        if half_input:
            out = out.half()
        return out


class ChannelLayerNorm(nn.Module):
    def __init__(self, channels, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.eps = eps

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]
