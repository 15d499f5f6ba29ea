# The fix of bad_input_cast_to_fp32_buffer.py: the constant kernel follows the activation, which keeps the model's dtype.
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
        h = F.conv2d(h, kernel.to(h.dtype), padding=1, groups=self.channels)
        h = h.to(self.weight.dtype)
        return F.conv2d(h, self.weight, stride=2)
