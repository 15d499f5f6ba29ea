# The fix of KellerJordan/modded-nanogpt#39: the cos/sin cache is kept in fp32; bf16 is used for the activations
# only, and the tables are cast where they meet them.
import torch
from torch import nn


class CachedRotary(nn.Module):
    def __init__(self, head_dim, theta=10000):
        super().__init__()
        self.inv_freq = (1.0 / theta) ** (torch.arange(0, head_dim, 2).float() / head_dim)
        self.cached_len = 0

    def _rebuild(self, length, device):
        steps = torch.arange(length, device=device).type_as(self.inv_freq)
        angles = torch.outer(steps, self.inv_freq)
        self.cos_cached = angles.cos().float()
        self.sin_cached = angles.sin().float()
        self.cached_len = length

    def forward(self, q):
        if q.shape[1] > self.cached_len:
            self._rebuild(q.shape[1], q.device)
        n = q.shape[1]
        return self.cos_cached[None, :n, None, :], self.sin_cached[None, :n, None, :]


def rotate(q, cos, sin):
    half = q.shape[-1] // 2
    a, b = q[..., :half], q[..., half:]
    c, s = cos.to(q.dtype), sin.to(q.dtype)
    return torch.cat([a * c + b * s, b * c - a * s], dim=-1)


activation_dtype = torch.bfloat16
