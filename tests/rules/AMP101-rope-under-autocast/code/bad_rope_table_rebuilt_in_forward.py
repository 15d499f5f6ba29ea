# The table is built in __init__ and rebuilt by the forward for a longer sequence: the rebuild runs under the
# autocast of the training step, and its matmul in bf16.
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, max_len=2048, base=10000.0):
        super().__init__()
        self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.max_len = max_len
        self._build_table(max_len)

    def _build_table(self, n):
        t = torch.arange(n, device=self.inv_freq.device).float()
        freqs = t[:, None] @ self.inv_freq[None, :]  # ampdoctor: expect[AMP101]
        self.cos_cached, self.sin_cached = freqs.cos(), freqs.sin()

    def forward(self, x):
        n = x.shape[1]
        if n > self.max_len:
            self.max_len = n
            self._build_table(n)
        return self.cos_cached[:n], self.sin_cached[:n]


def train(model, loader, opt):
    for x in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().mean()
        loss.backward()
        opt.step()
