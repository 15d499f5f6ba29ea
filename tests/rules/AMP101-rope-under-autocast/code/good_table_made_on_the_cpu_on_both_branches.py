# The frame positions are made on the CPU on both sides of a branch (one joins CPU tensors with torch.cat): the
# outer-product einsum runs on the CPU (torch joins and multiplies tensors of one device only), where CUDA's autocast
# casts nothing, although accelerate runs the step under CUDA bf16 autocast.
import numpy as np
import torch
from accelerate import Accelerator


class Rope3D(torch.nn.Module):
    def __init__(self, head_dim, base=10000):
        super().__init__()
        self.head_dim = head_dim
        self.base = base

    def table(self, freqs, frames, reference=None):
        if reference is not None:
            grid = torch.cat([torch.tensor([reference], dtype=torch.float32), torch.arange(0, frames - 1, dtype=torch.float32)])
        else:
            grid = np.linspace(0, frames, frames, endpoint=False, dtype=np.float32)
            grid = torch.from_numpy(grid).float()
        return torch.einsum("..., f -> ... f", grid, freqs)

    def forward(self, q, frames):
        dim = self.head_dim // 2
        freqs = 1.0 / (self.base ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
        angles = self.table(freqs, frames).to(q.device)
        return q * angles.cos() + q * angles.sin()


accelerator = Accelerator(mixed_precision="bf16")
