# Tensor.grad_dtype (torch >= 2.9) declares an fp32 .grad for a bf16 parameter on purpose: backward accumulates in
# fp32 and nothing fails (the retype of incident 3 without its crash).
import torch
from torch import nn

model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(torch.bfloat16)
for p in model.parameters():
    p.grad_dtype = torch.float32  # accumulate in fp32 on purpose
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
for micro in range(2):
    loss = model(torch.randn(4, 8, dtype=torch.bfloat16)).float().pow(2).mean() / 2
    loss.backward()
for p in model.parameters():
    p.data.add_(p.grad.to(p.dtype), alpha=-1e-3)
optimizer.zero_grad()
