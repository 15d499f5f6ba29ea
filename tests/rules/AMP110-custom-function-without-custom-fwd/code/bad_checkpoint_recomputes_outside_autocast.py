# The same checkpoint, whose backward recomputes with autocast off (the autograd engine's state): the recompute
# runs in fp32 while the forward ran in bf16, and the forward has no custom_fwd to record and replay the state.
import torch


class CheckpointFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, *args):  # ampdoctor: expect[AMP110:warning]
        ctx.run_function = run_function
        ctx.save_for_backward(*args)
        with torch.no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [x.detach().requires_grad_(True) for x in ctx.saved_tensors]
        with torch.enable_grad(), torch.autocast("cuda", enabled=False):
            outputs = ctx.run_function(*inputs)
        return (None, *torch.autograd.grad(outputs, inputs, grads))


def step(block, x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return CheckpointFunction.apply(block, x).float().mean()
