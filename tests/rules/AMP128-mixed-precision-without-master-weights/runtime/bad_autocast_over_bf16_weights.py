# Lightning-AI/litgpt#1252: the step runs under bf16 autocast ("mixed precision"), but the weights were already
# bf16, so there is no fp32 master copy and AdamW's small updates round away — measured at the step.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 8)).to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(torch.randn(16, 32, dtype=torch.bfloat16))
loss = out.float().pow(2).mean()
loss.backward()
optimizer.step()  # ampdoctor: expect[AMP128]
optimizer.zero_grad()
