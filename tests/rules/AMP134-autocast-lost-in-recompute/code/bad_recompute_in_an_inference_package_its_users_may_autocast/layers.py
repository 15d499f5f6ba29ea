# The same checkpoint and inference script in an installable package: no file of it trains or enters autocast,
# but its users' training code imports its layers and may run them under autocast.
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
            outputs = ctx.run_function(*inputs)  # ampdoctor: expect[AMP134:warning]
        return (None, *torch.autograd.grad(outputs, inputs, grads))


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)

    def forward(self, x):
        return CheckpointFunction.apply(self.lin, x)
