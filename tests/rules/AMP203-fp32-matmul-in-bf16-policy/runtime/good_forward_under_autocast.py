# The fix: the forward runs inside the bf16 autocast block, so its matmuls (and their backward) are bf16 while the
# weights stay fp32.
# ampdoctor: policy=bf16-mixed
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Linear(64, 64)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(32, 64), torch.randn(32, 64)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(x)
loss = F.mse_loss(out.float(), y)
loss.backward()
optimizer.step()
