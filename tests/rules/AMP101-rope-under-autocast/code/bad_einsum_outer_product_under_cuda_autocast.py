# An einsum that contracts no index is an outer product, yet CUDA's autocast casts einsum's operands to bf16 before
# torch decomposes it (einsum is on CUDA's lower-precision list itself): the positions are rounded to bf16 (4097 is
# 4096) and so are the angles. accelerate's bf16 mixed precision runs the step under CUDA autocast.
import torch
from accelerate import Accelerator


def rope(pos, dim, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64, device=pos.device) / dim)).float()
    angles = torch.einsum("...n,d->...nd", pos.float(), freqs)  # ampdoctor: expect[AMP101]
    return torch.cos(angles), torch.sin(angles)


accelerator = Accelerator(mixed_precision="bf16")
