# The fix of pytorch PR #71169: record the autocast state in forward and re-enter it around the recompute.
import torch
from torch.autograd import Function


class CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, *args):
        ctx.run_function = run_function
        ctx.autocast_kwargs = {"enabled": torch.is_autocast_enabled(), "dtype": torch.get_autocast_gpu_dtype()}
        ctx.save_for_backward(*args)
        with torch.no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [x.detach().requires_grad_(True) for x in ctx.saved_tensors]
        with torch.enable_grad(), torch.autocast("cuda", **ctx.autocast_kwargs):
            outputs = ctx.run_function(*inputs)
        return (None, *torch.autograd.grad(outputs, inputs, grads))


class ScaledSoftmax(Function):
    """A custom function that recomputes nothing: its backward uses saved outputs only."""

    @staticmethod
    def forward(ctx, x, scale):
        y = torch.softmax(x * scale, -1)
        ctx.save_for_backward(y)
        ctx.scale = scale
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return (g - (g * y).sum(-1, keepdim=True)) * y * ctx.scale, None
