# The fix of bad_fp32_features_returned_by_a_helper.py: the helper's fp32 features are cast to the projection's
# dtype. And a helper that may return what it was given (its input's dtype, whatever that is) is not known to
# return fp32.
import math

import torch
from torch import nn


def step_features(steps, width: int, base: float = 10_000.0):
    n = width // 2
    rates = torch.exp(-math.log(base) * torch.arange(n, dtype=torch.float32) / n)
    angles = steps[:, None].float() * rates[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)


def maybe_features(steps, width: int):
    if steps.ndim == 2:
        return steps  # already features, in the caller's dtype
    return step_features(steps, width)


class StepFeatures(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.width = width

    def forward(self, steps):
        return step_features(steps, self.width)


class Denoiser(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.features = StepFeatures(width)
        self.embed = nn.Linear(width, width)
        self.extra = nn.Linear(width, width)
        self.body = nn.Conv2d(4, width, 3, padding=1)

    def forward(self, latents, steps, extra_steps):
        cond = self.embed(self.features(steps).to(self.embed.weight.dtype))
        cond = cond + self.extra(maybe_features(extra_steps, self.embed.in_features))
        return self.body(latents.to(self.body.weight.dtype)) + cond[:, :, None, None]
