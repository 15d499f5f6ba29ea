# The model keeps its modulation in fp32 with a region pinned to CUDA; the project's training script runs it on
# Apple MPS too, where the region does nothing.
import torch
from torch import nn


class Modulation(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.out_layer = nn.Linear(dim, 6 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cuda", dtype=torch.float32):  # ampdoctor: expect[AMP140:warning]
            return self.out_layer(x)
