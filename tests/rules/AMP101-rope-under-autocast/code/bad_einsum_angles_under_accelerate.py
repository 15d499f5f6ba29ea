# huggingface/diffusers PR #13922: positions starting at 65536 under bf16 autocast, "each 512-integer block will
# collapse to the same value"; here the angles are an einsum (on autocast's lower-precision list) in a script that
# trains with accelerate's bf16 mixed precision.
import torch
from accelerate import Accelerator


def rope(pos, dim, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)).float()
    angles = torch.einsum("...n,d->...nd", pos.float(), freqs)  # ampdoctor: expect[AMP101]
    return torch.cos(angles), torch.sin(angles)


accelerator = Accelerator(mixed_precision="bf16")
