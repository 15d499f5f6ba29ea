"""A normalisation whose statistics go through a matmul: autocast runs it in bf16, and on activations with a large
offset the mean loses the signal. That module adds the error; the layers after it only inherit it."""
# ampdoctor: policy=bf16-mixed
# ampdoctor: expect-anywhere[AMP207]
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
    with torch.no_grad():
        model[0].bias.fill_(100.0)  # activations around 100 with spread 1: bf16 keeps ~0.4 of resolution there
    return model, (torch.randn(4, 32),)
