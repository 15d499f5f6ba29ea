# fp16 tables: a finished cos/sin table in fp16 is rounded as much as the fp16 product with q and k that follows
# (a note); fp16 frequencies are not, since the position that multiplies them multiplies their error too.
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim: int, max_len: int) -> None:
        super().__init__()
        inv_freq = 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim)
        self.inv_freq = inv_freq.half()  # ampdoctor: expect[AMP002:warning]
        freqs = torch.outer(torch.arange(max_len).float(), inv_freq)
        self.cos_cached = freqs.cos().half()  # ampdoctor: expect[AMP002:info]
        self.sin_cached = freqs.sin().to(torch.float16)  # ampdoctor: expect[AMP002:info]
        self.cos_bf16 = freqs.cos().bfloat16()  # ampdoctor: expect[AMP002:warning]

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        n = q.shape[-2]
        return q * self.cos_cached[:n] + q * self.sin_cached[:n]
