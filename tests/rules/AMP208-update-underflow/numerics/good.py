"""The same model with fp32 master weights (bf16-mixed): every update lands."""
# ampdoctor: policy=bf16-mixed
import torch
from torch import nn


def factory():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16), nn.Linear(16, 4))
    return model, (torch.randn(4, 16),)
