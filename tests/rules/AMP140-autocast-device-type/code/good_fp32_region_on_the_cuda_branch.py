# Model code that pins its fp32 region to CUDA only on the branch that runs for CUDA inputs: other devices take the
# other branch, which makes the region explicit.
import torch
from torch import nn


class Modulation(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.out_layer = nn.Linear(dim, 6 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "cuda":
            with torch.autocast("cuda", dtype=torch.float32):
                return self.out_layer(x)
        return self.out_layer.float()(x.float())


class Gate(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_cuda:
            return self.proj.float()(x.float())
        with torch.autocast(device_type="cuda", dtype=torch.float32):
            return self.proj(x)
