# The positions are made on the CPU in one branch and on the activations' device in the other: on the GPU, CUDA's
# autocast casts the outer-product einsum to bf16 (its operands and the angles), so the CPU branch does not make the
# other one safe. accelerate's bf16 mixed precision runs the step under CUDA autocast.
import torch
from accelerate import Accelerator


class Rope3D(torch.nn.Module):
    def __init__(self, head_dim, base=10000, precompute_on_cpu=False):
        super().__init__()
        self.head_dim = head_dim
        self.base = base
        self.precompute_on_cpu = precompute_on_cpu

    def forward(self, q, frames):
        dim = self.head_dim // 2
        freqs = 1.0 / (self.base ** (torch.arange(0, dim, 2, device=q.device).float() / dim))
        if not self.precompute_on_cpu:
            grid = torch.arange(frames, dtype=torch.float32, device=q.device)
        else:
            grid = torch.arange(frames, dtype=torch.float32)
        angles = torch.einsum("n,f->nf", grid, freqs).to(q.device)  # ampdoctor: expect[AMP101:warning]
        return q * angles.cos() + q * angles.sin()


accelerator = Accelerator(mixed_precision="bf16")
