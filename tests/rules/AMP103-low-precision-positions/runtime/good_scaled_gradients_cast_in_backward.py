# fp16 training with loss scaling: the scaled loss (x 4096) makes integer-valued gradients (up to 61440) that the backward casts
# to fp16. Those are gradients, not positions: positions exist in the forward pass only.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(16, 16)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(4, 16)
with torch.autocast("cpu", dtype=torch.float16):
    out = model(x)
loss = (out.float() * torch.arange(16.0)).sum() * 4096.0
loss.backward()
optimizer.step()
