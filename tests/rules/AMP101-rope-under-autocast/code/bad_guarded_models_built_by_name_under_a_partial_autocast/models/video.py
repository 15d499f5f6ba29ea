# The angles are a matmul, which the training script's bf16 autocast runs in bf16: its positions round.
import torch
from torch import nn


class VideoRotary(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, position_ids):
        freqs = self.inv_freq[None, :, None].float() @ position_ids[:, None, :].float()  # ampdoctor: expect[AMP101]
        return freqs.cos(), freqs.sin()
