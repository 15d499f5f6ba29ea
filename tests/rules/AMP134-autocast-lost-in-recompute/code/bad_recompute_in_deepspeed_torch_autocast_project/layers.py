# The same project, but its DeepSpeed config turns on torch_autocast: the engine runs the forward under bf16
# autocast, and the recompute in backward drops it. (apex's `amp_C` kernels and the unscale kernel say nothing
# either way.)
import amp_C
import torch
from apex.multi_tensor_apply import multi_tensor_applier


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


class Rotary(torch.nn.Module):
    def __init__(self, dim, precision=torch.half):
        super().__init__()
        self.precision = precision
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))


class Block(torch.nn.Module):
    def __init__(self, width, params_dtype):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)
        self.rotary = Rotary(width, precision=params_dtype)

    def forward(self, x):
        return CheckpointFunction.apply(self.lin, x)


def clip_and_unscale(grads, scale, found_inf, overflow_buf):
    multi_tensor_applier(amp_C.multi_tensor_scale, overflow_buf, [grads, grads], 1.0)
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, scale)
