# The fix of microsoft/DeepSpeed#2768 in plain torch: fp32 weights under bf16 autocast, so the 4 micro-batch
# gradients are summed in the fp32 .grad.
import torch
from torch import nn

model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for micro_batch in range(4):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.randn(4, 8))
    loss = out.float().pow(2).mean() / 4
    loss.backward()
optimizer.step()
optimizer.zero_grad()
