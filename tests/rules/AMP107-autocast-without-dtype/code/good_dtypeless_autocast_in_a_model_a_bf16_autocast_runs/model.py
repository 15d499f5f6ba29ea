# The training script runs this model under bf16 autocast; torch.autocast without a dtype, made inside that
# autocast, takes bf16 from it.
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 64)

    def forward(self, x):
        with torch.autocast(device_type="cuda"):
            return self.proj(x)
