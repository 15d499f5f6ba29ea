# The mechanism of EleutherAI/gpt-neox#1305: an fp32 tensor attribute (here a scale, there the rotary cache) that
# `model.to(bf16)` does not cast multiplies a bf16 activation; the product is fp32 and nothing casts it back.
import torch
from torch import nn


class ScaledMLP(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.up = nn.Linear(dim, dim)
        self.scale = torch.full((dim,), 0.5)  # plain attribute: stays fp32

    def forward(self, x):
        h = self.up(x) * self.scale  # ampdoctor: expect[AMP201]
        return h.sum(-1)


model = ScaledMLP().to(torch.bfloat16)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(4, 16, dtype=torch.bfloat16)).float().mean().backward()
optimizer.step()
