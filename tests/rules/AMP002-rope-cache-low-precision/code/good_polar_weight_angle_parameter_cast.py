# A layer that stores its weight in polar form: `theta` is a learned angle per weight entry, not a rotary table.
# Casting the model's weights to fp16 for inference casts it like any other weight.
import math

import torch
import torch.nn as nn


class PolarLinear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.radius = nn.Parameter(torch.Tensor(n_out, 1))
        self.theta = nn.Parameter(torch.Tensor(n_out, n_in))
        nn.init.kaiming_uniform_(self.theta, a=math.sqrt(5))
        nn.init.uniform_(self.radius, -0.1, 0.1)

    def forward(self, x):
        w = self.radius * torch.cos(self.theta)
        return x @ w.t()


def weights_to_fp16(model):
    for layer in model.modules():
        if isinstance(layer, PolarLinear):
            layer.radius.data = layer.radius.data.half()
            layer.theta.data = layer.theta.data.half()
