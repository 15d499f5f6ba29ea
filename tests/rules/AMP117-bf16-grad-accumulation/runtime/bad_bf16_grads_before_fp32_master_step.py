# microsoft/DeepSpeed#2768: DeepSpeed's BF16_Optimizer keeps fp32 master weights, but the micro-batch gradients are
# summed in the bf16 .grad before it copies them to the masters ("accumulation is also done in BF16").
# A minimal optimizer of the same shape, 4 micro-batches per step.
import torch
from torch import nn


class BF16_Optimizer(torch.optim.Optimizer):
    def __init__(self, params, lr):
        params = list(params)
        super().__init__(params, {"lr": lr})
        self.fp32_master = [p.detach().float().clone() for p in params]

    @torch.no_grad()
    def step(self):
        group = self.param_groups[0]
        for p, master in zip(group["params"], self.fp32_master):
            master.add_(p.grad.float(), alpha=-group["lr"])
            p.copy_(master)


model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(torch.bfloat16)
optimizer = BF16_Optimizer(model.parameters(), lr=1e-3)
for micro_batch in range(4):
    loss = model(torch.randn(4, 8, dtype=torch.bfloat16)).float().pow(2).mean() / 4
    loss.backward()
optimizer.step()  # ampdoctor: expect[AMP117]
optimizer.zero_grad()
