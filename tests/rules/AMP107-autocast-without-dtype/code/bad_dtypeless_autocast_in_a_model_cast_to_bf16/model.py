# The training script casts this model to bf16 and enters no autocast: torch.autocast without a dtype, made
# outside any autocast, runs in fp16 on CUDA.
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 64)

    def forward(self, x):
        with torch.autocast(device_type="cuda"):  # ampdoctor: expect[AMP107]
            return self.proj(x)
