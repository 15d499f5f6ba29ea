# A package's Function over activations only (q, k, v all come out of the same autocast region in its users' runs,
# so they share its dtype): nothing shows two dtypes meeting, and with no autocast of the project around it there is
# nothing to say.
import torch

from . import _attn  # compiled CUDA extension


class FusedAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        out, lse = _attn.forward(q, k, v)
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        return _attn.backward(grad_out, q, k, v, out, lse)
