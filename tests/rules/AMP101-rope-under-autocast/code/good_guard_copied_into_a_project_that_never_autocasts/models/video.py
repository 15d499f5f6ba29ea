# The matmul of the angles takes fp32 operands, and no run of this project computes in half: it is fp32.
import torch
from torch import nn


class VideoRotary(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, position_ids):
        freqs = self.inv_freq[None, :, None].float() @ position_ids[:, None, :].float()
        return freqs.cos(), freqs.sin()
