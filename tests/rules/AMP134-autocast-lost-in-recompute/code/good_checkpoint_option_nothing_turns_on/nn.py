# A guided-diffusion-style checkpoint helper: the Function is applied only when the caller's flag is true. Every
# block of this project passes its `use_checkpoint`, which defaults to False, and nothing in the project sets it:
# the recompute below never runs in this project's trainings (a note, not a warning).
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
            outputs = ctx.run_function(*inputs)
        return (None, None, *torch.autograd.grad(outputs, inputs, grads, allow_unused=True))
