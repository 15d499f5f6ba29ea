# A module-level helper casts to fp16, but the file calls it only where the gradient it is given is fp16 already: it
# handles what its caller passes, and is no evidence that the norm below runs in half precision.
import torch
from torch import Tensor, nn


def cast_to_half_keeping_tiny_values(x: Tensor, min_abs: float = 5.0e-06) -> Tensor:
    small = x.abs() < min_abs
    kept = min_abs * x.sign() * (torch.rand_like(x) * min_abs < x.abs())
    return torch.where(small, kept, x).to(torch.float16)


class TinyGradFilter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, min_abs: float) -> Tensor:
        ctx.min_abs = min_abs
        return x

    @staticmethod
    def backward(ctx, grad: Tensor):
        if grad.dtype == torch.float16:
            return cast_to_half_keeping_tiny_values(grad.to(torch.float32), min_abs=ctx.min_abs), None
        return grad, None


class ScaleNorm(nn.Module):
    def __init__(self, eps: float = 0.25):
        super().__init__()
        self.eps = nn.Parameter(torch.tensor(eps).log())

    def forward(self, x: Tensor) -> Tensor:
        return x * (torch.mean(x ** 2, dim=-1, keepdim=True) + self.eps.exp()) ** -0.5
