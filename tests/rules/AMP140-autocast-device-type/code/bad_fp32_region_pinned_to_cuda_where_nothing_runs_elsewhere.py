# An fp32 region pinned to CUDA in code that nothing linted runs on another device: the region holds where the code
# runs now, so a note (the same region is a warning where the project picks MPS, NPU, XPU or CPU autocast).
import torch
from torch import nn


class TimeEmbeddings(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.in_layer = nn.Linear(dim, dim)

    @torch.autocast(device_type="cuda", dtype=torch.float32)  # ampdoctor: expect[AMP140:info]
    def forward(self, time: torch.Tensor) -> torch.Tensor:
        return self.in_layer(time)


def compare(x: torch.Tensor) -> bool:
    return x.device.type == "mps"  # handling a device it may meet picks none
