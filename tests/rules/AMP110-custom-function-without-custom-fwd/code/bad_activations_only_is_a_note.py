# A fused attention Function applied to q, k and v, all computed by the same autocast region: they share its dtype,
# so a mix is possible (an fp32 softmax beside bf16 values) but nothing shows one. Without custom_fwd its backward
# still runs outside autocast, which is worth a note, not a warning.
import torch

from . import _attn  # compiled extension


class FusedAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):  # ampdoctor: expect[AMP110:info]
        out, lse = _attn.forward(q, k, v)
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, lse = ctx.saved_tensors
        return _attn.backward(grad, q, k, v, out, lse)


def attend(block, x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        q, k, v = block.qkv(x).chunk(3, dim=-1)
        return FusedAttention.apply(q, k, v)


class ExpertLinear(torch.nn.Module):
    # the same file's module hands a Function its own parameter beside the activation: fp32 beside bf16 under autocast
    def __init__(self, n, dim):
        super().__init__()
        self.experts = torch.nn.Parameter(torch.randn(n, dim, dim))

    def forward(self, x):
        return GroupedMatmul.apply(x, self.experts)


class GroupedMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, experts):  # ampdoctor: expect[AMP110:warning]
        ctx.save_for_backward(x, experts)
        return _attn.grouped_mm(x, experts)

    @staticmethod
    def backward(ctx, grad):
        x, experts = ctx.saved_tensors
        return _attn.grouped_mm_backward(grad, x, experts)


def run(model, x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return model(x)
