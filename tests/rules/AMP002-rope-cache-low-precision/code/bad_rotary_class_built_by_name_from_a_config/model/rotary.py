# Nothing imports OldRotary, but the config builds it by its dotted path (a factory reads `_target_`): its bf16
# frequencies are a warning.
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return torch.outer(positions.float(), self.inv_freq)


class OldRotary(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        inv_freq = 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim)
        self.inv_freq = inv_freq.bfloat16()  # ampdoctor: expect[AMP002:warning]

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return torch.outer(positions.float(), self.inv_freq.float())
