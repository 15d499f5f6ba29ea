# An installable package's embeddings; nothing in the package autocasts, its users' training does. Their CUDA
# autocast casts both einsum operands to bf16, so the rotary angles lose the low bits of large positions: a note,
# since the package cannot show which precision its users pick. The sinusoidal embedding beside it is no RoPE.
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, seq_len):
        t = torch.arange(seq_len, device=self.inv_freq.device).type_as(self.inv_freq)
        freqs = torch.einsum("i , j -> i j", t, self.inv_freq)  # ampdoctor: expect[AMP101:info]
        return torch.cat((freqs, freqs), dim=-1)


class SinusoidalEmbedding(nn.Module):
    def __init__(self, dim, theta=10000):
        super().__init__()
        self.register_buffer("inv_freq", theta ** -(torch.arange(dim // 2).float() / (dim // 2)))

    def forward(self, x):
        pos = torch.arange(x.shape[1], device=x.device)
        emb = torch.einsum("i, j -> i j", pos, self.inv_freq)  # ampdoctor: expect[AMP101:info]
        return torch.cat((emb.sin(), emb.cos()), dim=-1)
