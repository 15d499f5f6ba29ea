# A hand-written linear: under bf16 autocast the forward's matmul runs in bf16, but the backward runs with autocast
# off, so `grad @ w` multiplies the bf16 gradient of the bf16 output by the fp32 weight it saved and raises
# "expected both operands to have the same dtype"; custom_fwd/custom_bwd would replay the forward's autocast state.
import torch


class LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):  # ampdoctor: expect[AMP110:warning]
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w, grad.t() @ x


def step(x, w):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return LinearFn.apply(x, w).float().mean()
