# OLMo PR #339: `torch.is_autocast_enabled()` without a device is CUDA's autocast state; under CPU autocast it is
# False, so the CPU branches below it never run and the tensors are not cast to the autocast dtype.
from typing import Optional

import torch


def cast_if_autocast_enabled(tensor: torch.Tensor, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    if torch.is_autocast_enabled():  # ampdoctor: expect[AMP140]
        if dtype is None:
            if tensor.device.type == "cuda":
                dtype = torch.get_autocast_gpu_dtype()
            elif tensor.device.type == "cpu":
                dtype = torch.get_autocast_cpu_dtype()
            else:
                raise NotImplementedError()
        return tensor.to(dtype=dtype)
    return tensor


def cast_bias(bias: torch.Tensor, input_dtype: torch.dtype) -> torch.Tensor:
    if not torch.is_autocast_enabled():  # ampdoctor: expect[AMP140]
        return bias.to(input_dtype)
    return bias.to(torch.get_autocast_dtype(bias.device.type))


def smoke_test_on_cpu(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    # the file runs its own code under CPU autocast: the branches above are meant for it
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return model(x)
