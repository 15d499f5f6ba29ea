# An einsum with no contracted index is an outer product: torch decomposes it into an elementwise multiply, which
# autocast leaves in fp32 (on CUDA as on CPU), so these angles are exact under bf16 mixed precision.
import torch
from accelerate import Accelerator


def rope(pos, dim, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)).float()
    angles = torch.einsum("...n,d->...nd", pos.float(), freqs)
    return torch.cos(angles), torch.sin(angles)


accelerator = Accelerator(mixed_precision="bf16")
