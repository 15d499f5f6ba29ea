# The fix the catalog gives for pytorch/ao PR #1124: fp32 weights (the master copy) under bf16 autocast; the same
# small AdamW updates change the fp32 weights.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 8))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.1)
x = torch.randn(16, 32)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(x)
loss = out.float().pow(2).mean()
loss.backward()
optimizer.step()
optimizer.zero_grad()
