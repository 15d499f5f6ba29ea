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


class OffloadedCheckpoint(torch.autograd.Function):
    """custom_fwd/custom_bwd: the backward runs under the autocast state the forward ran under."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx, forward_function, hidden):
        ctx.forward_function = forward_function
        ctx.save_for_backward(hidden.to("cpu"))
        with torch.no_grad():
            return forward_function(hidden)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad):
        (hidden,) = ctx.saved_tensors
        hidden = hidden.cuda().detach().requires_grad_(True)
        with torch.enable_grad():
            out = ctx.forward_function(hidden)
        torch.autograd.backward(out, grad)
        return None, hidden.grad


def _active_autocast_context():
    return torch.autocast("cuda", dtype=torch.get_autocast_dtype("cuda"), enabled=torch.is_autocast_enabled("cuda"))


class ContextCheckpoint(torch.autograd.Function):
    """The state is captured by a helper in forward and re-entered from the ctx in backward (TransformerEngine PR #791)."""

    @staticmethod
    def forward(ctx, run_function, x):
        ctx.run_function = run_function
        ctx.gpu_amp_ctx = _active_autocast_context()
        ctx.save_for_backward(x)
        with torch.no_grad():
            return run_function(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_(True)
        with torch.enable_grad(), ctx.gpu_amp_ctx:
            out = ctx.run_function(x)
        torch.autograd.backward(out, grad)
        return None, x.grad
