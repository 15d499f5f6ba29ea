# The checkpoint of good_recompute_in_project_cast_to_half, in a project whose fp16 is a model cast kept by a
# master-weight helper class of its own, named ...Trainer (see fp16_util.py): constructing it is no framework's
# trainer that would enter the mixed-precision context. Nor is the end of `clamp_` a flag of that context.
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


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)

    def forward(self, x):
        return CheckpointFunction.apply(self.lin, x).clamp_(-10, 10)
