# An activation checkpoint written for autocast by hand: the forward records the autocast state it runs under and the
# backward re-enters it around the recompute, which is what custom_fwd/custom_bwd would do; its forward is the
# model's own code, which autocast covers.
import torch


class CheckpointFunction(torch.autograd.Function):
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
        with torch.enable_grad(), torch.cuda.amp.autocast(**ctx.autocast_kwargs):
            outputs = ctx.run_function(*inputs)
        return (None, *torch.autograd.grad(outputs, inputs, grads))


def step(block, x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return CheckpointFunction.apply(block, x).float().mean()
