# huggingface/diffusers PR #13364 (the shape, not its code): a blurring conv keeps its FIR kernel in a buffer built
# with torch.tensor and not saved (persistent=False). Loading the weights in bf16 leaves that buffer fp32, and the
# forward moves the activation to the buffer's dtype instead of the other way round.
import torch
import torch.nn.functional as F
from torch import nn


class BlurDown(nn.Module):
    def __init__(self, channels, taps=(1, 2, 1)):
        super().__init__()
        self.channels = channels
        fir = torch.tensor(taps)
        fir = fir[None, :] * fir[:, None]
        fir = fir / fir.sum()
        self.register_buffer("fir", fir, persistent=False)
        self.weight = nn.Parameter(torch.randn(channels, channels, 3, 3))

    def forward(self, h):
        kernel = self.fir[None, None].expand(self.channels, 1, -1, -1)
        h = h.to(kernel.dtype)  # ampdoctor: expect[AMP131:warning]
        h = F.conv2d(h, kernel, padding=1, groups=self.channels)
        h = h.to(self.weight.dtype)
        return F.conv2d(h, self.weight, stride=2)
