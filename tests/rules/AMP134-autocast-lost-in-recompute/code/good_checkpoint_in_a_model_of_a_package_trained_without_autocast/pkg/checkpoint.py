# The same hand-written checkpoint, in an installable package whose own trainer runs in fp32: no run of the project
# enters autocast around it, so the recompute has no autocast state to lose there (a note, not a warning).
import torch


class CheckpointFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, *args):
        ctx.run_function = run_function
        ctx.save_for_backward(*args)
        with torch.no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [x.detach().requires_grad_(True) for x in ctx.saved_tensors]
        with torch.enable_grad():
            outputs = ctx.run_function(*inputs)
        return (None, *torch.autograd.grad(outputs, inputs, grads))


def checkpoint(fn, *args):
    return CheckpointFunction.apply(fn, *args)
