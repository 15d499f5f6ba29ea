# A Triton kernel launched with the activation and a weight the Function is given: under bf16 autocast the
# activation arrives bf16 and the weight fp32, and the kernel loads both as one type.
import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * tl.load(w_ptr + offs, mask=mask), mask=mask)


class ScaleF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):  # ampdoctor: expect[AMP110:warning]
        out = torch.empty_like(x)
        n = x.numel()
        _scale_kernel[(triton.cdiv(n, 1024),)](x, w, out, n, BLOCK=1024)
        ctx.save_for_backward(x, w)
        return out

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x


def block(x, w):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return ScaleF.apply(x @ x.t(), w)


class BiasF(torch.autograd.Function):
    # an optional tensor defaults to None: it is no flag, and when given it reaches the kernel beside the activation
    @staticmethod
    def forward(ctx, x, bias=None, eps=1e-5):  # ampdoctor: expect[AMP110:warning]
        out = x.new_empty(x.shape)
        n = x.numel()
        _scale_kernel[(triton.cdiv(n, 1024),)](x, bias, out, n, BLOCK=1024)
        return out

    @staticmethod
    def backward(ctx, g):
        return g, None, None


class UpcastWeightF(torch.autograd.Function):
    # the weight upcast to fp32 beside a bf16 activation: a tensor method's `.float()` is no Python number
    @staticmethod
    def forward(ctx, x, weight):  # ampdoctor: expect[AMP110:warning]
        w = weight.float()
        out = x.new_empty(x.shape)
        _scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, w, out, x.numel(), BLOCK=1024)
        return out

    @staticmethod
    def backward(ctx, g):
        return g, None
