"""The same normalisation on activations centred near zero: bf16 keeps their spread, and every module adds about one
bf16 rounding."""
# ampdoctor: policy=bf16-mixed
import torch
from torch import nn


class MatmulNorm(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.register_buffer("average", torch.full((width, width), 1.0 / width))

    def forward(self, x):
        centred = x - x @ self.average
        return centred / ((centred * centred) @ self.average + 1e-5).sqrt()


def factory():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), MatmulNorm(32), nn.Linear(32, 32), nn.Linear(32, 8))
    return model, (torch.randn(4, 32),)
