# The casts of the bad case; the project runs the model under CUDA autocast only, so the CPU branch is never needed.
import torch
from torch import nn


class LayerNorm(nn.Module):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))

    def _cast_if_autocast_enabled(self, tensor: torch.Tensor) -> torch.Tensor:
        if torch.is_autocast_enabled():
            if tensor.device.type == "cuda":
                return tensor.to(torch.get_autocast_gpu_dtype())
            elif tensor.device.type == "cpu":
                return tensor.to(torch.get_autocast_cpu_dtype())
        return tensor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self._cast_if_autocast_enabled(self.weight)
        with torch.autocast(enabled=False, device_type=x.device.type):
            return nn.functional.layer_norm(self._cast_if_autocast_enabled(x), weight.shape, weight)
