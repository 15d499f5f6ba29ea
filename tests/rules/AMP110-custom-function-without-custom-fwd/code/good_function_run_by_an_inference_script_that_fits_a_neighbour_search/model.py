# A Function whose matmul would meet a bf16 activation and an fp32 weight under autocast, if a training run applied it
# under autocast. The only script that runs it under autocast is an inference script: no backward runs there, and the
# Function's backward (outside autocast, where the two dtypes meet) never runs.
import torch
from torch import nn


class _Project(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x @ weight.t()

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return grad @ weight, grad.t() @ x


class Head(nn.Module):
    def __init__(self, dim, out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out, dim))

    def forward(self, hidden):
        return _Project.apply(hidden, self.weight)
