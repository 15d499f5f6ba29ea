# Functions whose forward and backward hold only elementwise torch ops: autocast applies to the ops of a Function's
# forward as anywhere else, elementwise ops promote mixed inputs (bf16 activation * fp32 parameter -> fp32) instead
# of raising, and the engine casts each gradient the backward returns to its input's dtype. Mixed dtypes reaching
# them cost nothing that custom_fwd would save.
import torch


class ScaledSwish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta):
        ctx.save_for_backward(x, beta)
        x = x * torch.sigmoid(beta * x)
        return x

    @staticmethod
    def backward(ctx, grad):
        x, beta = ctx.saved_tensors
        s = torch.sigmoid(beta * x)
        return grad * (s + beta * x * s * (1 - s)), None


class Gate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        if w is None:
            return x
        return x * w

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def block(layer, x, beta, w):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return Gate.apply(ScaledSwish.apply(layer(x), beta), w)
