# A timestep embedding built inside the model: the sinusoidal features are computed from fp32 frequencies (as they
# should be) but go into the projection as they are, while the module casts its image input to its weights' dtype:
# with the weights in fp16 and no autocast, the linear layer meets fp32 features.
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

    def forward(self, latents, steps):
        n = self.freq_dim // 2
        rates = torch.exp(-math.log(10_000.0) * torch.arange(n, dtype=torch.float32) / n)
        phases = steps.float()[:, None] * rates[None]
        features = torch.cat([phases.cos(), phases.sin()], dim=-1)
        cond = self.project(features)  # ampdoctor: expect[AMP131:warning]
        return self.stem(latents.to(self.dtype)) + cond[:, :, None, None]
