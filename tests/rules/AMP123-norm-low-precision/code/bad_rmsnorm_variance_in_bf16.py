# sgl-project/sglang PR #27540: an RMSNorm computing its variance in the input dtype (bf16) drifted to cosine 0.51
# by layer 58; meta-llama/llama#1048 is the same norm without the `.float()`.
import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)  # ampdoctor: expect[AMP123]
        return self.weight * x * torch.rsqrt(variance + self.eps)


def qk_norm(q, eps=1e-6):
    return q * torch.rsqrt(torch.mean(q * q, dim=-1, keepdim=True) + eps)  # ampdoctor: expect[AMP123]


class Block(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.norm = RMSNorm(dim)
        self.mlp = nn.Linear(dim, dim)

    def forward(self, x):
        return x + self.mlp(self.norm(x))


model = Block().to(torch.bfloat16)
