# The same router beside the switch's reader: `project` maps the setting to the dtype its matmul runs in, so the
# module does run in bf16, and the dtype-less autocast made outside any other one runs the router in fp16.
from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F

world_size = 1
gemm_impl: Literal["bf16", "fp8"] = "bf16"


def project(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    if gemm_impl == "bf16":
        return F.linear(x, weight.to(x.dtype))
    raise NotImplementedError(gemm_impl)


class Router(nn.Module):
    def __init__(self, dim: int, experts: int, top_k: int = 2):
        super().__init__()
        self.top_k = top_k
        self.weight = nn.Parameter(torch.empty(experts, dim))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type=x.device.type):  # ampdoctor: expect[AMP107]
            scores = project(x, self.weight).softmax(dim=-1)
            weights, indices = scores.topk(self.top_k, dim=-1)
        return weights.type_as(x), indices
