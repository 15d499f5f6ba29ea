# A rotary attention layer takes a `precision` for its tables and overwrites it with fp32 before reading it: the
# caller's choice is lost, but fp32 is where rotary tables belong, so this is a note. The same overwrite with a
# half dtype, or of a precision that is no rotary table's, stays a warning.
import torch
from torch import nn


class RotaryHeadAttention(nn.Module):
    def __init__(self, dim, heads, precision):
        super().__init__()
        precision = torch.float  # ampdoctor: expect[AMP001:info]
        self.heads = heads
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq.to(precision))


class LlamaRoPE(nn.Module):  # the paper's spelling names a rotary embedding too
    def __init__(self, dim, precision):
        super().__init__()
        precision = torch.float32  # ampdoctor: expect[AMP001:info]
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq.to(precision))


class HalfRotaryHeadAttention(nn.Module):
    def __init__(self, dim, precision):
        super().__init__()
        precision = torch.half  # ampdoctor: expect[AMP001:warning]
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq.to(precision))


class Block(nn.Module):
    def __init__(self, dim, dtype):
        super().__init__()
        dtype = torch.float32  # ampdoctor: expect[AMP001:warning]
        self.proj = nn.Linear(dim, dim, dtype=dtype)
