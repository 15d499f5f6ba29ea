# A 3D rotary table precomputed from tensors made without a device: they are on the CPU, where CUDA's autocast
# casts nothing, so the outer-product einsums stay fp32 although accelerate runs the step under CUDA bf16 autocast
# (the table is moved to the GPU afterwards, already exact).
import torch
from accelerate import Accelerator


class Rope3D(torch.nn.Module):
    def __init__(self, head_dim, base=10000):
        super().__init__()
        self.head_dim = head_dim
        self.base = base
        self.tables = {}

    def table(self, frames, height):
        dim = self.head_dim // 2
        freqs_t = 1.0 / (self.base ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
        grid_t = torch.linspace(0, frames - 1, frames, dtype=torch.float32)
        grid_h = torch.linspace(0, height - 1, height, dtype=torch.float32)
        angles_t = torch.einsum("..., f -> ... f", grid_t, freqs_t)
        angles_h = torch.einsum("..., f -> ... f", grid_h, freqs_t)
        return torch.cat((angles_t[:, None, :].expand(-1, height, -1), angles_h[None].expand(frames, -1, -1)), -1)

    def forward(self, q, frames, height):
        angles = self.table(frames, height).to(q.device)
        return q * angles.cos() + q * angles.sin()


accelerator = Accelerator(mixed_precision="bf16")
