# EleutherAI/gpt-neox#1305's shape: the fp32 product of a promotion reaches a bf16 Linear two lines later, which
# fails with "mat1 and mat2 must have the same dtype"; the audit reports one finding, at the failure, with the
# chain back to the promotion (its origin: the promotion's own finding folds into it).
import torch
from torch import nn


class ScaledMLP(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.up = nn.Linear(dim, dim)
        self.down = nn.Linear(dim, dim)
        self.scale = torch.full((dim,), 0.5)  # plain attribute: stays fp32

    def forward(self, x):
        h = self.up(x) * self.scale
        return self.down(h)  # ampdoctor: expect[AMP201]


model = ScaledMLP().to(torch.bfloat16)
model(torch.randn(4, 16, dtype=torch.bfloat16)).float().mean().backward()
