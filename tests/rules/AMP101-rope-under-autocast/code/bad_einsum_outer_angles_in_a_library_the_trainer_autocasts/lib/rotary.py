# A rotary embedding written as in many libraries: the angles are the outer product of positions and inverse
# frequencies, as an einsum. The trainer below runs it under CUDA bf16 autocast, which casts both operands first.
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, seq_len):
        t = torch.arange(seq_len, device=self.inv_freq.device).type_as(self.inv_freq)
        freqs = torch.einsum("i , j -> i j", t, self.inv_freq)  # ampdoctor: expect[AMP101]
        return torch.cat((freqs, freqs), dim=-1)
