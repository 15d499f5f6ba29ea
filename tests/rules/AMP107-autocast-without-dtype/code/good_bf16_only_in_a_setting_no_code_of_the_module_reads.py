# A model module that keeps a GEMM switch from the file it was adapted from (`gemm_impl`, typed as a choice of
# values) while none of its code reads it any more: the string names no dtype any run takes. Its router enters
# autocast without a dtype, which takes the dtype of the autocast its caller runs it under; nothing here says bf16.
from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F

world_size = 1
gemm_impl: Literal["bf16", "fp8"] = "bf16"


class Router(nn.Module):
    def __init__(self, dim: int, experts: int, top_k: int = 2):
        super().__init__()
        self.top_k = top_k
        self.weight = nn.Parameter(torch.empty(experts, dim))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type=x.device.type):
            scores = F.linear(x, self.weight).softmax(dim=-1)
            weights, indices = scores.topk(self.top_k, dim=-1)
        return weights.type_as(x), indices
