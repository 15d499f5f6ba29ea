# The same Function in a folder of scripts, no installable package: only these scripts run it, and none of them
# enters autocast, so nothing runs it with half activations beside its fp32 weights.
import torch

import _experts  # compiled CUDA extension


class ExpertLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, counts, weight, bias=None):
        ctx.save_for_backward(inp, counts, weight, bias)
        return _experts.linear_forward(inp, counts, weight, bias)

    @staticmethod
    def backward(ctx, grad_out):
        inp, counts, weight, bias = ctx.saved_tensors
        grad_inp, grad_weight, grad_bias = _experts.linear_backward(grad_out, inp, counts, weight, bias)
        return grad_inp, None, grad_weight, grad_bias


class ExpertsLayer(torch.nn.Module):
    def __init__(self, experts, d_in, d_out):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(experts, d_out, d_in))
        self.bias = torch.nn.Parameter(torch.zeros(experts, d_out))

    def forward(self, inp, counts):
        return ExpertLinear.apply(inp, counts, self.weight, self.bias)
