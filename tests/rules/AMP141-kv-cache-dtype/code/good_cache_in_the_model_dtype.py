# Caches allocated in the model's dtype (its weights', the keys', the run's one compute dtype), or in the default dtype
# the program sets: nothing fixes them apart from the model.
import torch
import torch.nn.functional as F
from torch import nn


class KVCache(nn.Module):
    def __init__(self, batch, heads, length, dim, dtype):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(batch, heads, length, dim, dtype=dtype))
        self.register_buffer("v_cache", torch.zeros(batch, heads, length, dim, dtype=dtype))


class Decoder(nn.Module):
    def __init__(self, heads, dim):
        super().__init__()
        self.heads, self.dim = heads, dim
        self.out = nn.Linear(heads * dim, heads * dim)
        self.cache = None

    def setup_cache(self, batch, length):
        self.cache = KVCache(batch, self.heads, length, self.dim, dtype=self.out.weight.dtype)

    def step(self, q, k, v):
        cache_k = torch.empty(k.shape, dtype=k.dtype, device=k.device)
        cache_k.copy_(k)
        return F.scaled_dot_product_attention(q, cache_k, v)


class Cache:
    def __init__(self, batch, length, dim):
        # the default dtype, which the program may set to the model's (`torch.set_default_dtype`)
        self.k_cache = torch.zeros(batch, length, dim)
        self.v_cache = torch.zeros(batch, length, dim)


def run(model, batch, length, bf16):
    dtype = torch.bfloat16 if bf16 else torch.float32
    model = model.to(dtype)
    return KVCache(batch, 8, length, 64, dtype=dtype)


def quantized(batch, length):
    # an int8 cache is quantized on purpose, with its own scales
    k_cache = torch.zeros(batch, length, 64, dtype=torch.int8)
    return k_cache


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = None

    def setup_caches(self, batch, length, dtype=torch.bfloat16):
        # a default its callers (in other files) override with the model's dtype
        self.cache = KVCache(batch, 8, length, 64, dtype=dtype)


def paged_cache(config, blocks, size):
    # the dtype the run's precision option picks, which the model is run in too
    if config.dtype == "bf16":
        dtype = torch.bfloat16
    else:
        raise ValueError(f"unsupported dtype {config.dtype}")
    cache_k = torch.zeros(blocks, size, 8, 64, dtype=dtype)
    cache_v = torch.zeros(blocks, size, 8, 64, dtype=dtype)
    return cache_k, cache_v


class StaticCache:
    def __init__(self, batch, length, dtype=None):
        # fp32 only where the caller gives no dtype (callers in other files give the model's)
        self.dtype = dtype if dtype is not None else torch.float32
        self.key_cache = torch.zeros(batch, 8, length, 64, dtype=self.dtype)
        self.value_cache = torch.zeros(batch, 8, length, 64, dtype=self.dtype)
