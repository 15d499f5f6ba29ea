# The same unused checkpoint helper, in a demo folder of an installable package: only the demo beside it imports
# this module, and it never calls `checkpoint`, so no run of this project recomputes through the Function.
import torch


def checkpoint(func, inputs, flag):
    if flag:
        return CheckpointFunction.apply(func, *inputs)
    return func(*inputs)


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


def count_params(model):
    return sum(p.numel() for p in model.parameters())
