# bf16 only where CUDA reports it, or where the code tests the other devices itself.
import torch


def compute_dtype() -> torch.dtype:
    return torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float16


def default_precision(training: bool, on_mps: bool) -> str:
    if on_mps or (torch.cuda.is_available() and not torch.cuda.is_bf16_supported()):
        return "16-mixed" if training else "16-true"
    return "bf16-mixed" if training else "bf16-true"


def fallback() -> str:
    if not torch.cuda.is_available() or torch.cuda.is_bf16_supported():
        return "32-true"
    return "16-mixed"
