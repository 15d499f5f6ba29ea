# bghira/SimpleTuner#854 (incident 3): bf16 weights, 2 micro-batches, `.grad` retyped to fp32 after each backward.
# torch 2.13 accumulates the second backward into the fp32 `.grad` without error (it keeps the `.grad`'s dtype) and
# SGD steps the mixed pair: nothing fails, but parameter and gradient differ in dtype (a warning, at the cast).
import torch
from torch import nn

model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(torch.bfloat16)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
for micro_batch in range(2):
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    for param in model.parameters():
        param.grad.data = param.grad.data.to(torch.float32)  # ampdoctor: expect[AMP003:warning]
optimizer.step()
optimizer.zero_grad()
