# The fix of pytorch/pytorch#87979: `torch.amp.custom_bwd(device_type="cuda")` runs backward in the forward's
# autocast state, bf16 included.
import torch


class ScaledProduct(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx, lhs, rhs):
        ctx.save_for_backward(lhs, rhs)
        return lhs.mm(rhs) * 0.5

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad_out):
        lhs, rhs = ctx.saved_tensors
        return 0.5 * grad_out.mm(rhs.t()), 0.5 * lhs.t().mm(grad_out)


def step(x, w):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return ScaledProduct.apply(x, w)
