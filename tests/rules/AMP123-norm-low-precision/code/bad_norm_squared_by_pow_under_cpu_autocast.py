# CPU autocast's fp32 list is short: `pow` stays in its input's dtype there, so an RMSNorm of a bf16 activation
# computes its variance in bf16 under CPU autocast, where the same code is fp32 on CUDA.
import torch


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)  # ampdoctor: expect[AMP123]
        return self.weight * x * torch.rsqrt(variance + self.eps)


def train(model, loader, optimizer):
    for x in loader:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(x).float().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
