# The angles are an einsum under accelerate's CUDA bf16 autocast, and then cast to the activations' dtype: where that
# is bf16, the cast rounds them (at position 4000, by several radians) whether the einsum ran in bf16 or not, so the
# finding asks for both, the product in fp32 and no cast of the angles.
import torch
from accelerate import Accelerator


class RoPE(torch.nn.Module):
    def __init__(self, base=10000.0):
        super().__init__()
        self.base = base
        self.cache = {}

    def get_cos_sin(self, dim, seq_len, device, dtype):
        if (dim, seq_len, device, dtype) not in self.cache:
            inv_freq = 1.0 / (self.base ** (torch.arange(0, dim, 2).float().to(device) / dim))
            t = torch.arange(seq_len, device=device, dtype=inv_freq.dtype)
            freqs = torch.einsum("i,j->ij", t, inv_freq).to(dtype)  # ampdoctor: expect[AMP101:warning]
            freqs = torch.cat((freqs, freqs), dim=-1)
            self.cache[dim, seq_len, device, dtype] = (freqs.cos(), freqs.sin())
        return self.cache[dim, seq_len, device, dtype]


accelerator = Accelerator(mixed_precision="bf16")
