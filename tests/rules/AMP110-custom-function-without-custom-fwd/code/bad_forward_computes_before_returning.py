# Like an identity gradient hook, but the forward computes its output from the inputs (and rebinds the name it
# returns): those ops run on whatever dtypes arrive, which autocast does not cast.
import torch


class ScaledSwish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta):  # ampdoctor: expect[AMP110]
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
    def forward(ctx, x, w):  # ampdoctor: expect[AMP110]
        if w is None:
            return x
        return x * w

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def block(layer, x, beta, w):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return Gate.apply(ScaledSwish.apply(layer(x), beta), w)
