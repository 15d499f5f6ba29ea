# "vis" also names vision models (a vision encoder's file): such a file runs a model, and its positions in fp16 are
# rounded past 2048 as anywhere (inference code, not a plotting script).
import torch
from torch import nn


class VisEncoder(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, patches: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(patches.shape[1], device=patches.device).to(torch.float16)  # ampdoctor: expect[AMP103]
        return self.proj(patches) + pos[None, :, None]
