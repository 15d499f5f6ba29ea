# The fix Megatron uses (--accumulate-allreduce-grads-in-fp32) for the rounding of microsoft/DeepSpeed#2768: after
# each micro-batch's backward the bf16 .grad is added into an fp32 `main_grad` buffer and released, so nothing is
# summed in bf16; the optimizer steps the fp32 masters from main_grad.
import torch
from torch import nn


class Float16Optimizer(torch.optim.Optimizer):
    def __init__(self, params, lr):
        params = list(params)
        super().__init__(params, {"lr": lr})
        self.fp32_master = [p.detach().float().clone() for p in params]

    @torch.no_grad()
    def step(self):
        group = self.param_groups[0]
        for p, master in zip(group["params"], self.fp32_master):
            master.add_(p.main_grad, alpha=-group["lr"])
            p.copy_(master)


model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(torch.bfloat16)
for p in model.parameters():
    p.main_grad = torch.zeros_like(p, dtype=torch.float32)
optimizer = Float16Optimizer(model.parameters(), lr=1e-3)
for micro_batch in range(4):
    loss = model(torch.randn(4, 8, dtype=torch.bfloat16)).float().pow(2).mean() / 4
    loss.backward()
    for p in model.parameters():
        p.main_grad.add_(p.grad.float())
        p.grad = None
optimizer.step()
