# The fixes of huggingface/transformers PR #25421 and sgl-project/sglang PR #27540, in three spellings: the
# statistics are taken on an fp32 copy and the result cast back once; the whole norm runs on `x.float()`; or the
# mean itself is asked for in fp32. A mean of squares outside a norm (an MSE) is no norm.
import torch
from torch import nn


class UpcastRMSNorm(nn.Module):
    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, h):
        wide = h.to(torch.float32)
        mean_sq = wide.pow(2).mean(-1, keepdim=True)
        return self.gain * (wide * torch.rsqrt(mean_sq + self.eps)).to(h.dtype)


class FloatPathRMSNorm(nn.Module):
    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.offset = nn.Parameter(torch.zeros(width))

    def _normalize(self, z):
        return z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, h):
        out = self._normalize(h.float()) * (1.0 + self.offset.float())
        return out.type_as(h)


class AccumulateInFp32Norm(nn.Module):
    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, h):
        mean_sq = h.pow(2).mean(-1, keepdim=True, dtype=torch.float32)
        return self.gain * (h * torch.rsqrt(mean_sq + self.eps)).to(self.gain.dtype)


def mse(pred, target):
    return (pred - target).pow(2).mean()


model = nn.Sequential(nn.Linear(64, 64), UpcastRMSNorm(64)).to(torch.bfloat16)
