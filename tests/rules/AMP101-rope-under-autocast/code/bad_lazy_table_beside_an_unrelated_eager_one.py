# Two unrelated rotary classes with a method of the same name. The eager one builds its table in the constructor and
# rebuilds it only for longer sequences (a note); the lazy one leaves its table None until the first forward, so its
# first build, and every one after, runs under the step's CUDA autocast: the eager class's constructor call is not
# the lazy class's.
import torch
from accelerate import Accelerator
from torch import nn


class EagerRotary(nn.Module):
    def __init__(self, dim, max_len=4096):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)
        self._build(max_len)

    def _build(self, seq_len):
        self.cached = seq_len
        t = torch.arange(seq_len, device=self.inv_freq.device, dtype=torch.float32)
        self.angles = torch.einsum("i,j->ij", t, self.inv_freq)  # ampdoctor: expect[AMP101:info]

    def forward(self, x):
        if x.shape[1] > self.cached:
            self._build(x.shape[1])
        return self.angles[: x.shape[1]].cos()


class LazyRotary(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)
        self.cached = 0
        self.angles = None

    def _build(self, seq_len):
        self.cached = seq_len
        t = torch.arange(seq_len, device=self.inv_freq.device, dtype=torch.float32)
        self.angles = torch.einsum("i,j->ij", t, self.inv_freq)  # ampdoctor: expect[AMP101:warning]

    def forward(self, x):
        if x.shape[1] > self.cached:
            self._build(x.shape[1])
        return self.angles[: x.shape[1]].cos()


accelerator = Accelerator(mixed_precision="bf16")
