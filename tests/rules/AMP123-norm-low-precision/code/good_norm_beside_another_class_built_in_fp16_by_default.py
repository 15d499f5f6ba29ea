# A layers file with two norms: a TF-style LayerNorm, and a fused-style RMSNorm whose parameters are made in the dtype
# its constructor is given, fp16 when the caller gives none. That default is what the RMSNorm is built in; it says
# nothing of what runs through the LayerNorm, whose input dtype nothing in the file fixes. No other half evidence
# here or in a project: nothing to report.
import torch
from torch import nn


class TFLayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-12):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))
        self.eps = eps

    def forward(self, x):
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight * x + self.bias


class PackedRMSNorm(nn.Module):
    def __init__(self, dim, dtype=torch.half, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x):
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return (x * torch.rsqrt(variance + self.eps)).to(self.weight.dtype) * self.weight
