# The same parameter default on the norm's own constructor: this norm is built in fp16 unless its caller says
# otherwise, so its weights are half and so, in a model built this way, is its input; the variance is taken in it.
import torch
from torch import nn


class PackedLayerNorm(nn.Module):
    def __init__(self, dim, dtype=torch.half, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(dim, dtype=dtype))

    def forward(self, x):
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)  # ampdoctor: expect[AMP123]
        return self.weight * (x - u) / torch.sqrt(s + self.eps) + self.bias
