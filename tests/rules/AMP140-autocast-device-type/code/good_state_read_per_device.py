# The state read for the tensor's own device; and CUDA-only code that reads CUDA's state, which is right.
from typing import Optional

import torch


def cast_if_autocast_enabled(tensor: torch.Tensor, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    if tensor.device.type == "cuda" and torch.is_autocast_enabled():
        return tensor.to(dtype=dtype if dtype is not None else torch.get_autocast_gpu_dtype())
    elif tensor.device.type == "cpu" and torch.is_autocast_cpu_enabled():
        return tensor.to(dtype=dtype if dtype is not None else torch.get_autocast_cpu_dtype())
    return tensor


def cast_bias(bias: torch.Tensor, input_dtype: torch.dtype) -> torch.Tensor:
    if not torch.is_autocast_enabled(bias.device.type):
        return bias.to(input_dtype)
    return bias.to(torch.get_autocast_dtype(bias.device.type))


def either_device(x: torch.Tensor) -> torch.Tensor:
    if torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled():
        if x.device.type == "cpu":
            return x.to(torch.get_autocast_cpu_dtype())
        return x.to(torch.get_autocast_gpu_dtype())
    return x


def cuda_rounding(weight: torch.Tensor) -> torch.Tensor:
    if torch.is_autocast_enabled():
        return weight.to(torch.get_autocast_gpu_dtype())
    return weight
