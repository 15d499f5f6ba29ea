# The fix the catalog gives for EleutherAI/gpt-neox#1305's promotion: cast the stray fp32 operand to the
# activation dtype where it meets it (or register it as a buffer so `.to()` casts it).
import torch
from torch import nn


class ScaledMLP(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.up = nn.Linear(dim, dim)
        self.down = nn.Linear(dim, dim)
        self.scale = torch.full((dim,), 0.5)

    def forward(self, x):
        h = self.up(x)
        h = h * self.scale.to(h.dtype)
        return self.down(h)


model = ScaledMLP().to(torch.bfloat16)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(4, 16, dtype=torch.bfloat16)).float().mean().backward()
optimizer.step()
