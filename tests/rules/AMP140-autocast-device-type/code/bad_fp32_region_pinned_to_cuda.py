# diffusers PR #12814: the time embedding of a model kept in fp32 by an autocast region pinned to CUDA; on CPU,
# MPS or XPU the decorator changes nothing and the embedding runs in the model's bf16. This file runs on MPS.
import torch
from torch import nn

DEVICE = torch.device("mps" if torch.backends.mps.is_available() else "cuda")


class TimeEmbeddings(nn.Module):
    def __init__(self, dim: int, freqs: torch.Tensor) -> None:
        super().__init__()
        self.freqs = freqs
        self.in_layer = nn.Linear(dim, dim)

    @torch.autocast(device_type="cuda", dtype=torch.float32)  # ampdoctor: expect[AMP140:warning]
    def forward(self, time: torch.Tensor) -> torch.Tensor:
        args = torch.outer(time, self.freqs.to(device=time.device))
        return self.in_layer(torch.cat([torch.cos(args), torch.sin(args)], dim=-1))


class Modulation(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.out_layer = nn.Linear(dim, 6 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.amp.autocast("cuda", dtype=torch.float):  # ampdoctor: expect[AMP140:warning]
            return self.out_layer(x)


class Head(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.head = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, shift: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cuda", dtype=torch.float32):  # ampdoctor: expect[AMP140:warning]
            x = (x + shift.unsqueeze(1)) @ weight  # a matmul: autocast casts it, on CUDA only
        with torch.autocast(device_type="cuda", dtype=torch.float32):  # ampdoctor: expect[AMP140:warning]
            return self.head(x.view(x.shape))
