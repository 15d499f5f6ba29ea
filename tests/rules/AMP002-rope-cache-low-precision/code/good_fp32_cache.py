# The fix of KellerJordan/modded-nanogpt#39: the cos/sin cache is kept in fp32; bf16 is used for the
# activations only, and the tables are cast where they meet them.
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.seq_len_cached = None

    def forward(self, x):
        seq_len = x.shape[1]
        if seq_len != self.seq_len_cached:
            self.seq_len_cached = seq_len
            t = torch.arange(seq_len, device=x.device).type_as(self.inv_freq)
            freqs = torch.outer(t, self.inv_freq).to(x.device)
            self.cos_cached = freqs.cos().float()
            self.sin_cached = freqs.sin().float()
        return self.cos_cached[None, :, None, :], self.sin_cached[None, :, None, :]


def apply_rotary_emb(x, cos, sin):
    d = x.shape[3] // 2
    x1, x2 = x[..., :d], x[..., d:]
    y1 = x1 * cos.to(x.dtype) + x2 * sin.to(x.dtype)
    y2 = x1 * (-sin).to(x.dtype) + x2 * cos.to(x.dtype)
    return torch.cat([y1, y2], 3).type_as(x)


model_dtype = torch.bfloat16
