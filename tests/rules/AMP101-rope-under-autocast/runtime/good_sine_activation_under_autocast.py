# A sine activation (SIREN) on a linear layer's output under bf16 autocast: a half matmul feeding sin, but its
# operands are activations and weights, not integer positions, so these are no rotary angles.
import torch
from torch import nn


class Siren(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        return torch.sin(30.0 * self.lin(x))


model = nn.Sequential(Siren(), Siren(), nn.Linear(16, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(32, 16)
with torch.autocast("cpu", dtype=torch.bfloat16):
    loss = model(x).float().pow(2).mean()
loss.backward()
optimizer.step()
