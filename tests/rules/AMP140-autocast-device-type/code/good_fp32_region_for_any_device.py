# The fp32 island written for whatever device the input is on, and a CUDA-only training script that autocasts
# to fp32 on purpose (a script names its own device).
import torch
from torch import nn


class TimeEmbeddings(nn.Module):
    def __init__(self, dim: int, freqs: torch.Tensor) -> None:
        super().__init__()
        self.freqs = freqs
        self.in_layer = nn.Linear(dim, dim)

    def forward(self, time: torch.Tensor) -> torch.Tensor:
        args = torch.outer(time.to(torch.float32), self.freqs.to(device=time.device))
        return self.in_layer(torch.cat([torch.cos(args), torch.sin(args)], dim=-1))


class Modulation(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.out_layer = nn.Linear(dim, 6 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(x.device.type, dtype=torch.float32):
            return self.out_layer(x)


def evaluate(model, batch):
    with torch.autocast("cuda", dtype=torch.float32):
        return model(batch.cuda())
