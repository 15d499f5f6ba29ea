# A block's residual update under a CUDA-pinned fp32 autocast: adds, multiplies and views are not ops autocast casts
# (type promotion decides their dtype on every device), so the region computes the same on CUDA, CPU or MPS.
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.modulation = nn.Parameter(torch.zeros(1, 6, dim))

    def forward(self, x: torch.Tensor, y: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        with torch.amp.autocast("cuda", dtype=torch.float32):
            e = (self.modulation.unsqueeze(0) + e).chunk(6, dim=2)
        with torch.autocast(device_type="cuda", dtype=torch.float32):
            x = x + (e[2].squeeze(2) * y.view(x.shape)).view(x.shape)
        return x
