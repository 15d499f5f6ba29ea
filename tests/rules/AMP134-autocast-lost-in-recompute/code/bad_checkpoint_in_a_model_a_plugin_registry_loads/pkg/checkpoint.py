# An activation checkpoint written by hand: its backward recomputes the block without the autocast state the
# forward ran under, so under the trainer's bf16 autocast the recompute runs in fp32.
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
            outputs = ctx.run_function(*inputs)  # ampdoctor: expect[AMP134]
        return (None, *torch.autograd.grad(outputs, inputs, grads))


def checkpoint(fn, *args):
    return CheckpointFunction.apply(fn, *args)
