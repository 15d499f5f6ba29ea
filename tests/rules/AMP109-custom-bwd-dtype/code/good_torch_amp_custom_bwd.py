# The fix of pytorch/pytorch#87979: `torch.amp.custom_bwd(device_type="cuda")` runs backward in the forward's
# autocast state, bf16 included.
import torch


class MyMM(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a.mm(b)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad.mm(b.t()), a.t().mm(grad)


def step(x, w):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return MyMM.apply(x, w)
