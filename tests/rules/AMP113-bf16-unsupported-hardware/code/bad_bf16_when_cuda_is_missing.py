# A bf16 capability check that treats "no CUDA at all" as "bf16 supported": on a Mac the run lands on MPS in bf16.
import torch


def default_precision(training: bool) -> str:
    if not torch.cuda.is_available() or torch.cuda.is_bf16_supported():  # ampdoctor: expect[AMP113:warning]
        return "bf16-mixed" if training else "bf16-true"
    return "16-mixed" if training else "16-true"


def compute_dtype() -> torch.dtype:
    return torch.float16 if torch.cuda.is_available() and not torch.cuda.is_bf16_supported() else torch.bfloat16  # ampdoctor: expect[AMP113:warning]
