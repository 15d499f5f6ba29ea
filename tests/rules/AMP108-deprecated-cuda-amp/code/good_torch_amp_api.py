# The replacements the FutureWarning names (pytorch/tutorials#3331): `torch.amp.*` with an explicit device. A
# table that merely names the old callables (torch._dynamo does) calls nothing deprecated.
import torch
from torch.amp import GradScaler, autocast

KNOWN_CONTEXT_MANAGERS = (torch.cuda.amp.autocast, torch.amp.autocast)


class FusedScale(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx, x):
        return x * 2

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad):
        return grad * 2


scaler = GradScaler("cuda", enabled=False)
with autocast("cuda", dtype=torch.bfloat16):
    pass
