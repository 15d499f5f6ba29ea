# A Megatron-style project: DeepSpeed's bf16 engine casts the model (ds_config.json), apex's fused kernels
# (`amp_C`) clip the gradients, a loss scaler of its own calls torch's unscale kernel, and the rotary table takes a
# `precision` dtype. None of that enters the mixed-precision context the recompute would drop (a word in any file
# of the project, even a comment, would count).
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
            outputs = ctx.run_function(*inputs)
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
