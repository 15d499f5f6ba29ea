# The trainer builds a block passing `use_checkpoint` by position (True), which a search for the keyword would
# miss: the recompute runs, a warning.
import torch


def checkpoint(func, inputs, params, flag):
    if flag:
        return CheckpointFunction.apply(func, len(inputs), *inputs, *params)
    return func(*inputs)


class CheckpointFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, length, *args):
        ctx.run_function = run_function
        ctx.inputs = list(args[:length])
        with torch.no_grad():
            return run_function(*ctx.inputs)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [x.detach().requires_grad_(True) for x in ctx.inputs]
        with torch.enable_grad():
            outputs = ctx.run_function(*inputs)  # ampdoctor: expect[AMP134:warning]
        return (None, None, *torch.autograd.grad(outputs, inputs, grads, allow_unused=True))
