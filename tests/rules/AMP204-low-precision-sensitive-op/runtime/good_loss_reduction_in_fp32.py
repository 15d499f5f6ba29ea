# The fix the catalog gives: upcast the sensitive op's input with `.float()`; the loss runs in fp32.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(8, 16, dtype=torch.bfloat16), torch.randn(8, 4, dtype=torch.bfloat16)
loss = F.mse_loss(model(x).float(), y.float())
loss.backward()
optimizer.step()
