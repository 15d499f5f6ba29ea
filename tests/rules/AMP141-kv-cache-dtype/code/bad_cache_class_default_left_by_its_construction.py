# A cache class whose dtype defaults to bf16, built without one: the cache is bf16 whatever the model runs in (fp32 on
# the CPU, fp16 on older GPUs), and attention then meets bf16 keys beside queries of the model's dtype.
import torch
from torch import nn


class KVCache(nn.Module):
    def __init__(self, batch, heads, length, dim, dtype=torch.bfloat16):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(batch, heads, length, dim, dtype=dtype))
        self.register_buffer("v_cache", torch.zeros(batch, heads, length, dim, dtype=dtype))

    def update(self, pos, k, v):
        self.k_cache[:, :, pos] = k
        self.v_cache[:, :, pos] = v
        return self.k_cache, self.v_cache


class Decoder(nn.Module):
    def __init__(self, heads, dim):
        super().__init__()
        self.heads, self.dim = heads, dim
        self.qkv = nn.Linear(heads * dim, 3 * heads * dim)
        self.cache = None

    def setup_cache(self, batch, length):
        self.cache = KVCache(batch, self.heads, length, self.dim)  # ampdoctor: expect[AMP141:info]


class Engine:
    def __init__(self, heads, dim, layers):
        self.shape = {"heads": heads, "dim": dim}
        self.layers = layers

    def prefill(self, device):
        # the dtype chosen by the device, not by the model (which a run may cast to fp16 on CUDA)
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32  # ampdoctor: expect[AMP141:info]
        shape = {"length": 128, "batch": 1}
        return KVCache(heads=8, dim=64, dtype=dtype, **shape)
