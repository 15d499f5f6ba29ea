# Every caller builds the rotary module with torch_dtype=torch.bfloat16, so `.to(dtype=self.torch_dtype)` casts the table to bf16.
import torch
from torch import nn

class Rotary(nn.Module):
    def __init__(self, dim, torch_dtype=torch.float32):
        super().__init__()
        self.torch_dtype = torch_dtype
        inv_freq = 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim)
        t = torch.arange(4096).float()
        freqs = torch.outer(t, inv_freq)
        self.cos_cached = freqs.cos().to(dtype=self.torch_dtype)  # ampdoctor: expect[AMP002]

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rope = Rotary(64, torch_dtype=torch.bfloat16)
