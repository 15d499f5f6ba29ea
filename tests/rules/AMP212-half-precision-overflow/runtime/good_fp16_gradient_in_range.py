# The same fp16 model and loss as bad_fp16_gradient_overflows.py with a gradient of 1e3, which fp16 holds:
# nothing overflows in the forward or the backward.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(16, 16).half()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(8, 16).half() * 0.1
out = model(x)
loss = out.float().sum() * 1e3
loss.backward()
optimizer.step()
