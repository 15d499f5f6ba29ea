# A layer library whose only mention of half precision is a Function that hands back fp16 when its input is fp16 or
# autocast is on: it follows the precision its caller runs under and says nothing of which that is. The norm below
# is not evidence of a half run either.
import torch
from torch import Tensor, nn


class GatedSwish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        if x.dtype == torch.float16:
            x = x.to(torch.float32)
        y = x * torch.sigmoid(x - 1.0)
        ctx.save_for_backward(x)
        if x.dtype == torch.float16 or torch.is_autocast_enabled():
            y = y.to(torch.float16)
        return y

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x - 1.0)
        return grad * (s + x * s * (1 - s))


class ScaleNorm(nn.Module):
    def __init__(self, channels: int, eps: float = 0.25):
        super().__init__()
        self.eps = nn.Parameter(torch.tensor(eps).log())

    def forward(self, x: Tensor) -> Tensor:
        scales = (torch.mean(x ** 2, dim=-1, keepdim=True) + self.eps.exp()) ** -0.5
        return x * scales


class HalfSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, dim: int) -> Tensor:
        ans = x.softmax(dim=dim)
        if torch.is_autocast_enabled():  # softmax autocasts to fp32; hand back autocast's dtype
            ans = ans.to(torch.float16)
        ctx.save_for_backward(ans)
        return ans

    @staticmethod
    def backward(ctx, grad: Tensor):
        (ans,) = ctx.saved_tensors
        return ans * (grad - (grad * ans).sum(-1, keepdim=True)), None
