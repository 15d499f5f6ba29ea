# The variance is squared with `pow`, which CUDA autocast runs in fp32 whatever its input's dtype (it is on
# autocast's fp32 list, as `rsqrt` is), and the mean of fp32 squares is fp32. The weights stay fp32 (no model cast):
# nothing of this norm's statistics is computed in bf16.
import torch


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * x * torch.rsqrt(variance + self.eps)


def train(model, loader, optimizer):
    for x in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
