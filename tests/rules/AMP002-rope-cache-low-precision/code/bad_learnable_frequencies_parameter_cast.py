# Rotary frequencies made learnable are still a table of frequencies: halving the parameter rounds every angle.
import torch
import torch.nn as nn


class LearnedRotary(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.theta = nn.Parameter(1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, positions):
        angles = torch.outer(positions.float(), self.theta)
        return angles.cos(), angles.sin()


def to_half(model):
    for m in model.modules():
        if isinstance(m, LearnedRotary):
            m.theta.data = m.theta.data.half()  # ampdoctor: expect[AMP002:warning]
