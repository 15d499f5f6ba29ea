# The only caller keeps the table fp32: the parameter's value is known at every call, and it is fp32.
import torch
from torch import nn

class Rotary(nn.Module):
    def __init__(self, dim, torch_dtype=torch.float32):
        super().__init__()
        self.torch_dtype = torch_dtype
        inv_freq = 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim)
        t = torch.arange(4096).float()
        freqs = torch.outer(t, inv_freq)
        self.cos_cached = freqs.cos().to(dtype=self.torch_dtype)

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rope = Rotary(64, torch_dtype=torch.float32)
