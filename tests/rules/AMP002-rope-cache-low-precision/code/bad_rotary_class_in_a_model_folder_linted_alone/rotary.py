# A folder of model code with no script of its own (linted alone, or a library its users' scripts import): what
# nothing in it builds may be built by code outside it, so its bf16 frequencies stay a warning.
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
