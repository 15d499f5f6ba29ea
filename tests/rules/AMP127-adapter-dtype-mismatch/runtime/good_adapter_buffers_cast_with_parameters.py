# The fix of peft PR #1874: the upcast of the adapter to fp32 casts its buffers with its parameters.
import torch
import torch.nn.functional as F
from torch import nn


class ScaledProjection(nn.Module):
    def __init__(self, dim, rank=4):
        super().__init__()
        self.base = nn.Linear(dim, dim)
        self.register_buffer("proj_down", torch.randn(rank, dim))
        self.register_buffer("proj_up", torch.randn(dim, rank))
        self.scale_d = nn.Parameter(torch.ones(rank))
        self.scale_b = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        out = self.base(x)
        x = x.to(self.scale_d.dtype)
        delta = self.scale_b * F.linear(self.scale_d * F.linear(x, self.proj_down), self.proj_up)
        return out + delta.to(out.dtype)


model = nn.Sequential(nn.Linear(16, 16), ScaledProjection(16)).to(torch.bfloat16)
for p in model.parameters():
    p.requires_grad_(False)
for p in (model[1].scale_d, model[1].scale_b):
    p.data = p.data.float()
    p.requires_grad_(True)
for name, b in model[1].named_buffers():
    setattr(model[1], name, b.float())
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
model(torch.randn(4, 16, dtype=torch.bfloat16)).float().sum().backward()
optimizer.step()
