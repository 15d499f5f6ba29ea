# The model file never names a dtype: the project's Composer run config (yamls/pretrain.yaml) trains in fp32
# (`precision: fp32`): no bf16 anywhere, so the dtype-less autocast contradicts nothing.
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int = 64):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        with torch.autocast("cuda"):
            return self.proj(x)
