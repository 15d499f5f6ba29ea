# The same block in bf16: its exponent range is fp32's, so the large activations stay finite.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 16)).to(torch.bfloat16)
with torch.no_grad():
    model[2].weight.mul_(3e4)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(8, 16).to(torch.bfloat16) * 4, torch.randn(8, 16)
out = model(x)
loss = torch.nn.functional.mse_loss(out.float(), y)
loss.backward()
optimizer.step()
