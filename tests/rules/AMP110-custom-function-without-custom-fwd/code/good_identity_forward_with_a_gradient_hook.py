# Functions whose forward hands its input back untouched and do their work in backward (a gradient balancer, an
# auxiliary loss added through backward): no op runs in the forward for autocast to cast.
import torch


class BalanceGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x > 0, scale)
        return x

    @staticmethod
    def backward(ctx, grad):
        positive, scale = ctx.saved_tensors
        return grad - grad.abs() * scale * (positive.to(grad.dtype) - 0.5), None


class AddLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, loss):
        ctx.shape = loss.shape
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, torch.ones(ctx.shape, dtype=grad.dtype, device=grad.device)


def block(layer, x, aux):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        h = BalanceGrad.apply(layer(x), torch.tensor(0.01))
        return AddLoss.apply(h, aux)
