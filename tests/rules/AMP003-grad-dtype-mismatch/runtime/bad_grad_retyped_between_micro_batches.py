# bghira/SimpleTuner#854 (incident 3): bf16 weights, 2 micro-batches, `.grad` retyped to fp32 after each backward.
# On CUDA the second backward raises "Expected BFloat16, got Float"; on CPU torch accumulates silently and the
# audit still sees the fp32 .grad of bf16 parameters, at the cast.
import torch
from torch import nn

model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(torch.bfloat16)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
for micro_batch in range(2):
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    for param in model.parameters():
        param.grad.data = param.grad.data.to(torch.float32)  # ampdoctor: expect[AMP003]
optimizer.step()
optimizer.zero_grad()
