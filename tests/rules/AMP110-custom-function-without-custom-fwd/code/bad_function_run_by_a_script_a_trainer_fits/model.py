# A Function whose matmul meets a bf16 activation and an fp32 weight under autocast: a Lightning trainer built and
# fitted in one expression runs it under bf16 autocast in training, and its backward runs outside autocast.
import torch
from torch import nn


class _Project(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):  # ampdoctor: expect[AMP110:warning]
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
