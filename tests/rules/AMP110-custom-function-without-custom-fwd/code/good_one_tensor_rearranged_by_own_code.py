# Functions that take one tensor (the rest are flags and sizes) and only rearrange it, in their own helpers or in a
# Triton kernel writing into a buffer made in its dtype: nothing can reach them in a second dtype, and the backward
# gets the gradient alone.
import torch
import triton
import triton.language as tl


def _scan(x, flip):
    return torch.cat([x, x.flip(-1) if flip else x], dim=1)


def _merge(y, flip):
    a, b = y.chunk(2, dim=1)
    return a + (b.flip(-1) if flip else b)


class ScanF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, flip=True):
        ctx.flip = flip
        fn = _scan
        return fn(x, flip)

    @staticmethod
    def backward(ctx, grad):
        flip = ctx.flip
        return _merge(grad, flip), None


@triton.jit
def _copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


class CopyF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor):
        n = int(x.numel())
        BLOCK = 1024
        y = x.new_empty(x.shape) if x.is_contiguous() else x.new_empty(x.shape[::-1])
        _copy_kernel[(triton.cdiv(n, BLOCK),)](x.contiguous(), y, n, BLOCK=BLOCK)
        return y

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        out = g.new_empty(g.shape)
        _copy_kernel[(triton.cdiv(g.numel(), 1024),)](g.contiguous(), out, g.numel(), BLOCK=1024)
        return out


def block(x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return CopyF.apply(ScanF.apply(x, True))
