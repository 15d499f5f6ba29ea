# The same layers, but the dtype tested is a module-level setting of this file, not one its caller passes: the file
# chose bf16 for itself, so the RMSNorm's variance is taken in half precision.
import torch
from torch import nn

train_dtype = torch.bfloat16


class RMSNorm(nn.Module):
    def __init__(self, size, eps=1e-5):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        norm_x = torch.mean(x * x, dim=-1, keepdim=True)  # ampdoctor: expect[AMP123]
        return self.scale * x * torch.rsqrt(norm_x + self.eps)


def build_position_cache(seq_len, n_elem, dtype, base=10000):
    theta = 1.0 / (base ** (torch.arange(0, n_elem, 2).float() / n_elem))
    angles = torch.outer(torch.arange(seq_len).float(), theta)
    cache = torch.stack([torch.cos(angles), torch.sin(angles)], dim=-1)
    if dtype in (torch.float16, torch.bfloat16):
        cache = cache.half()
    return cache
