"""Pure bf16: a norm's weights sit at 1.0, where a bf16 ulp is 2^-7; an AdamW step of lr=1e-4 cannot move them."""
# ampdoctor: policy=bf16-true
# ampdoctor: expect-anywhere[AMP208]
import torch
from torch import nn


def factory():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16), nn.Linear(16, 4))
    return model, (torch.randn(4, 16),)
