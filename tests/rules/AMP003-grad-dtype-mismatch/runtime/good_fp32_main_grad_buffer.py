# The fix for bghira/SimpleTuner#854 that keeps fp32 accumulation: the bf16 .grad is left alone and summed into a
# separate fp32 buffer (Megatron's main_grad), which is handed back in the parameter's dtype for the step.
import torch
from torch import nn

model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(torch.bfloat16)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
main_grads = {p: torch.zeros_like(p, dtype=torch.float32) for p in model.parameters()}
for micro_batch in range(2):
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    for param in model.parameters():
        main_grads[param] += param.grad.float()
        param.grad = None
for param in model.parameters():
    param.grad = main_grads[param].to(param.dtype)
optimizer.step()
optimizer.zero_grad()
