# The run is meant to be bf16-mixed, but the autocast block wraps only the loss: the forward (and so its
# backward) matmuls run in fp32 (the "fp32 where bf16 was meant" leak of EleutherAI/gpt-neox#1305, here costing
# time instead of failing). The backward's matmuls are placed at the forward line that made them: one finding.
# ampdoctor: policy=bf16-mixed
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Linear(64, 64)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(32, 64), torch.randn(32, 64)
out = model(x)  # ampdoctor: expect[AMP203]
with torch.autocast("cpu", dtype=torch.bfloat16):
    loss = F.mse_loss(out, y)
loss.backward()
optimizer.step()
