# With `custom_fwd(cast_inputs=torch.float32)` the old decorators run forward and backward with autocast off, in
# fp32, so the fp16 default of pytorch/pytorch#87979 never applies.
import torch


class FP32Softmax(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
    def forward(ctx, x):
        y = x.softmax(-1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @torch.cuda.amp.custom_bwd
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return y * (grad - (grad * y).sum(-1, keepdim=True))


def step(x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return FP32Softmax.apply(x)
