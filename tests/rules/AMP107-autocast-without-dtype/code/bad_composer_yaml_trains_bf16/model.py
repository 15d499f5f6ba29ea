# The model file never names a dtype: the project's Composer run config (yamls/pretrain.yaml) trains in bf16
# (`precision: amp_bf16`), so this dtype-less autocast, which is fp16 on CUDA, contradicts it.
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int = 64):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        with torch.autocast("cuda"):  # ampdoctor: expect[AMP107]
            return self.proj(x)
