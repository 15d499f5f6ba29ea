# pytorch/ao PR #1124: bf16 weights and plain AdamW at lr 1e-5; an update below half an ulp of the weight rounds
# to no change, so most weights stay bit-identical after the step. The audit measures it at `optimizer.step()`.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 8)).to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.1)
x = torch.randn(16, 32, dtype=torch.bfloat16)
loss = model(x).float().pow(2).mean()
loss.backward()
optimizer.step()  # ampdoctor: expect[AMP119]
optimizer.zero_grad()
