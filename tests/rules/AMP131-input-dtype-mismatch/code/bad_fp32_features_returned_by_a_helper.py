# The timestep features come from a helper of the same file (through a small module whose forward calls it): every
# return of the helper is built from fp32 frequencies, so the projection, in the dtype of the model's weights, meets
# fp32 features when the weights are fp16 and no autocast runs the step.
import math

import torch
import torch.nn.functional as F
from torch import nn


def step_features(steps, width: int, swap: bool = False, gain: float = 1.0, base: float = 10_000.0):
    n = width // 2
    rates = -math.log(base) * torch.arange(n, dtype=torch.float32, device=steps.device)
    rates = torch.exp(rates / n)
    angles = steps[:, None].float() * rates[None, :]
    angles = gain * angles
    feats = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)
    if swap:
        feats = torch.cat([feats[:, n:], feats[:, :n]], dim=-1)
    if width % 2:
        feats = F.pad(feats, (0, 1))
    return feats


class StepFeatures(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.width = width

    def forward(self, steps):
        return step_features(steps, self.width, swap=True)


class Denoiser(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.features = StepFeatures(width)
        self.embed = nn.Linear(width, width)
        self.body = nn.Conv2d(4, width, 3, padding=1)

    def forward(self, latents, steps):
        cond = self.embed(self.features(steps))  # ampdoctor: expect[AMP131:warning]
        return self.body(latents.to(self.body.weight.dtype)) + cond[:, :, None, None]
