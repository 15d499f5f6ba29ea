# The same utilities module, and the model calls its `checkpoint` helper (imported under another name), so the
# recompute runs in the project's bf16 autocast training without that autocast state.
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
            outputs = ctx.run_function(*inputs)  # ampdoctor: expect[AMP134]
        return (None, *torch.autograd.grad(outputs, inputs, grads))


def count_params(model):
    return sum(p.numel() for p in model.parameters())
