# The same CUDA-only test in a file that names "cpu" in its autocast calls only to keep CPU autocast off: autocast is
# enabled only off the CPU, and a CPU region turns it off. No code here runs under CPU autocast.
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


def train_step(model: torch.nn.Module, x: torch.Tensor, device: torch.device) -> torch.Tensor:
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type != "cpu"):
        return model(cast_if_autocast_enabled(x))


def reference(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cpu", enabled=False):
        return model(x.float())
