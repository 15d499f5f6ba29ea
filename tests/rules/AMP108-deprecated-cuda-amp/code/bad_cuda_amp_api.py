# mit-han-lab/efficientvit#127 (torch 2.4) and huggingface/trl PR #1921: `torch.cuda.amp.*` warns
# "FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated".
import torch
from torch.cuda.amp import GradScaler, autocast  # ampdoctor: expect[AMP108]


class FusedScale(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)  # ampdoctor: expect[AMP108]
    def forward(ctx, x):
        return x * 2

    @staticmethod
    @torch.cuda.amp.custom_bwd  # ampdoctor: expect[AMP108]
    def backward(ctx, grad):
        return grad * 2


scaler = torch.cuda.amp.GradScaler(enabled=False)  # ampdoctor: expect[AMP108]
