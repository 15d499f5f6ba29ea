# pytorch #71124 / TransformerEngine #787: a hand-written activation checkpoint whose backward re-runs the block
# outside the autocast the forward ran under; the recompute runs in fp32 and meets bf16 saved tensors
# ("expected mat1 and mat2 to have the same dtype, but got: c10::BFloat16 != float").
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
