# The cos/sin table is computed while the module is built (in __init__, or a method only __init__ calls), which is
# outside the autocast region the forward passes run in: the matmul there runs in fp32.
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, max_len=4096, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_len).float()
        freqs = t[:, None] @ inv_freq[None, :]
        self.register_buffer("cos_cached", freqs.cos(), persistent=False)
        self.register_buffer("sin_cached", freqs.sin(), persistent=False)

    def forward(self, x):
        n = x.shape[1]
        return self.cos_cached[:n].to(x.dtype), self.sin_cached[:n].to(x.dtype)


class CachedRotary(nn.Module):
    def __init__(self, dim, max_len=4096, base=10000.0):
        super().__init__()
        self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self._build_table(max_len)

    def _build_table(self, n):
        t = torch.arange(n, device=self.inv_freq.device).float()
        freqs = t[:, None] @ self.inv_freq[None, :]
        self.cos_cached, self.sin_cached = freqs.cos(), freqs.sin()

    def forward(self, x):
        n = x.shape[1]
        return self.cos_cached[:n], self.sin_cached[:n]


def train(model, loader, opt):
    for x in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().mean()
        loss.backward()
        opt.step()
