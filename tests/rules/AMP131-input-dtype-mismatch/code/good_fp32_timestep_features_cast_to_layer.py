# The fix of bad_fp32_timestep_features_into_half_layer.py: the fp32 features are cast to the projection's dtype;
# features that meet a tensor of unknown dtype are not known to be fp32.
import math

import torch
from torch import nn


class StepConditioner(nn.Module):
    def __init__(self, channels: int, freq_dim: int = 128):
        super().__init__()
        self.freq_dim = freq_dim
        self.project = nn.Linear(freq_dim, channels)
        self.stem = nn.Conv2d(4, channels, 3, padding=1)

    @property
    def dtype(self):
        return self.stem.weight.dtype

    def forward(self, latents, steps, scale):
        n = self.freq_dim // 2
        rates = torch.exp(-math.log(10_000.0) * torch.arange(n, dtype=torch.float32) / n)
        phases = steps.float()[:, None] * rates[None]
        features = torch.cat([phases.cos(), phases.sin()], dim=-1)
        cond = self.project(features.to(self.dtype))
        mixed = self.project(features * scale)
        return self.stem(latents.to(self.dtype)) + cond[:, :, None, None] + mixed[:, :, None, None]
