# A checkpoint that recomputes without restoring the forward's dtype context, in an application: a model released
# with inference scripts of its own and no installable package. No file trains or enters a mixed-precision context
# (a word for one in any file, even a comment, would count), and no other code imports the folder: no run has a
# context to lose.
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
        return CheckpointFunction.apply(self.lin, x)
