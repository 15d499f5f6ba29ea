# An installable package ships a Function over its compiled expert kernel. Nothing in the package enters autocast,
# but its users train under theirs: autocast does not reach inside the Function, so the kernel gets their half
# activations beside the fp32 expert weights ("expected scalar type Float but found BFloat16").
import torch

from . import _experts  # compiled CUDA extension


class ExpertLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp, counts, weight, bias=None):  # ampdoctor: expect[AMP110:info]
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
