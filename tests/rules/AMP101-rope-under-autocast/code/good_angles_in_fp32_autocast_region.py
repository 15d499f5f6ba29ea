# A video transformer that keeps its rotary angles in an fp32 autocast region: `autocast(dtype=torch.float32)` runs
# its body in fp32 (CUDA autocast turns itself off for fp32), so the matmul of positions and frequencies is exact.
import torch


class VideoRope(torch.nn.Module):
    def __init__(self, dim, theta=10000.0):
        super().__init__()
        self.register_buffer("freqs", 1.0 / theta ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, grid):
        with torch.autocast(device_type=grid.device.type, dtype=torch.float32):
            angles = torch.einsum("...,f->...f", grid.float(), self.freqs)
        return angles.cos(), angles.sin()
