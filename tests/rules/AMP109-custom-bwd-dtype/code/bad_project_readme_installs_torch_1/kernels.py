# pytorch/pytorch#87979 (torch 1.12.1, fixed by PR #88029): `torch.cuda.amp.custom_bwd` re-entered autocast with
# its default dtype, so a forward under bf16 autocast got an fp16 backward
# ("Forward dtype: torch.bfloat16" / "Backward dtype: torch.float16").
import torch
from torch.cuda.amp import custom_bwd, custom_fwd


class ScaledProduct(torch.autograd.Function):
    @staticmethod
    @custom_fwd
    def forward(ctx, lhs, rhs):
        ctx.save_for_backward(lhs, rhs)
        return lhs.mm(rhs) * 0.5

    @staticmethod
    @custom_bwd  # ampdoctor: expect[AMP109:warning]
    def backward(ctx, grad_out):
        lhs, rhs = ctx.saved_tensors
        return 0.5 * grad_out.mm(rhs.t()), 0.5 * lhs.t().mm(grad_out)


def step(x, w):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return ScaledProduct.apply(x, w)
