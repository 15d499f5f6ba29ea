# pytorch/pytorch#87979 (torch 1.12.1, fixed by PR #88029): `torch.cuda.amp.custom_bwd` re-entered autocast with
# its default dtype, so a forward under bf16 autocast got an fp16 backward
# ("Forward dtype: torch.bfloat16" / "Backward dtype: torch.float16").
import torch
from torch.cuda.amp import custom_bwd, custom_fwd


class MyMM(torch.autograd.Function):
    @staticmethod
    @custom_fwd
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a.mm(b)

    @staticmethod
    @custom_bwd  # ampdoctor: expect[AMP109]
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad.mm(b.t()), a.t().mm(grad)


def step(x, w):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return MyMM.apply(x, w)
