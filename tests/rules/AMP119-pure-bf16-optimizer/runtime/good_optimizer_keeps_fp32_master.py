# bf16 weights whose optimizer keeps an fp32 master copy (as DeepSpeed's BF16_Optimizer and Megatron's
# Float16Optimizer do): the small update lands in the fp32 copy, and a bf16 weight left bit-identical by this step
# is no lost update. The audit knows such optimizers by their class.
import torch
from torch import nn


class MixedPrecisionOptimizer(torch.optim.Optimizer):
    def __init__(self, params, lr):
        params = list(params)
        super().__init__(params, {"lr": lr})
        self.master = [p.detach().float().clone().requires_grad_() for p in params]
        self.inner = torch.optim.AdamW(self.master, lr=lr, weight_decay=0.1)

    @torch.no_grad()
    def step(self, closure=None):
        model_params = [p for group in self.param_groups for p in group["params"]]
        for master, p in zip(self.master, model_params):
            master.grad = None if p.grad is None else p.grad.float()
        self.inner.step()
        for master, p in zip(self.master, model_params):
            p.copy_(master)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 8)).to(torch.bfloat16)
optimizer = MixedPrecisionOptimizer(model.parameters(), lr=1e-5)
x = torch.randn(16, 32, dtype=torch.bfloat16)
loss = model(x).float().pow(2).mean()
loss.backward()
optimizer.step()
optimizer.zero_grad()
