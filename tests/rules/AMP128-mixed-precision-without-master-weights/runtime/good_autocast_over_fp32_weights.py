# The fix of Lightning-AI/litgpt#1252: load fp32 weights and let autocast cast to bf16 for compute; the fp32
# weights are the master copy and keep the small updates.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 8))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(torch.randn(16, 32))
loss = out.float().pow(2).mean()
loss.backward()
optimizer.step()
optimizer.zero_grad()
