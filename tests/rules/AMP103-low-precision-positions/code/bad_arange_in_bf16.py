# pytorch/pytorch#137774: `torch.arange(241, 273, dtype=torch.bfloat16)` gives 256, 256, 256, 258, 260, ... —
# positions built directly in bf16 collapse beyond 256.
import torch

GRID_DTYPE = torch.bfloat16


def position_ids(seq_len, device):
    return torch.arange(seq_len, device=device, dtype=torch.bfloat16)  # ampdoctor: expect[AMP103]


def grid(size):
    return torch.linspace(0, size - 1, steps=size, dtype=GRID_DTYPE)  # ampdoctor: expect[AMP103]
