# The same CUDA-only test guarding a CPU branch, in a file that never runs under CPU autocast (its trainer enters
# autocast on CUDA only): the branch is dead but never needed, as in composer's low-precision norms.
import torch


def cast_if_autocast_enabled(tensor: torch.Tensor) -> torch.Tensor:
    if torch.is_autocast_enabled():
        if tensor.device.type == "cuda":
            dtype = torch.get_autocast_gpu_dtype()
        elif tensor.device.type == "cpu":
            dtype = torch.get_autocast_cpu_dtype()
        else:
            raise NotImplementedError()
        return tensor.to(dtype=dtype)
    return tensor


def train_step(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return model(cast_if_autocast_enabled(x))
