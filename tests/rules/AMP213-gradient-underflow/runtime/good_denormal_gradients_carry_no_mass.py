# Most of this gradient is fp32 denormals (a loss term weighted 1e-37 on half the outputs): bf16 flushes them to zero,
# but they carry none of the gradient's L2 mass, which sits in the other half. Counting values would call 50% lost.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 512))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(8, 64), torch.randn(8, 512)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(x)
out = out.float()
weights = torch.cat([torch.full((256,), 1e-37), torch.ones(256)])
loss = (weights * (out - y).square()).mean()
loss.backward()
optimizer.step()
