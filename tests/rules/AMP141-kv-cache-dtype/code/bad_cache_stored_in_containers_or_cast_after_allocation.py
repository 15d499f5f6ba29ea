# Caches whose dtype is fixed in shapes other than a `dtype=` literal beside the name: a tensor cast after it is
# allocated (`.cuda().half()`), per-layer tensors appended to a list or kept in a tuple, list or dict, a class that
# stores its `dtype` parameter's default on `self`, and a method's dtype default passed on to the cache class. Each
# is right only while the model runs in the dtype the code names.
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, heads, max_batch, max_len):
        super().__init__()
        self.wqkv = nn.Linear(dim, 3 * dim)
        self.cache_k = torch.zeros((max_batch, max_len, heads, dim // heads)).cuda().half()  # ampdoctor: expect[AMP141:info]
        self.cache_v = torch.zeros(max_batch, max_len, heads, dim // heads).to(torch.bfloat16)  # ampdoctor: expect[AMP141:info]


class LayerCache:
    def __init__(self, layers, batch, heads, length, head_dim, device, dtype=torch.float32):
        self.dtype = dtype
        shape = (batch, heads, length, head_dim)
        self.key_cache, self.value_cache = [], []
        for _ in range(layers):
            self.key_cache.append(torch.zeros(shape, dtype=self.dtype, device=device))
            self.value_cache.append(torch.zeros(shape, dtype=self.dtype, device=device))


def start_generation(config, batch):
    return LayerCache(config.layers, batch, config.heads, 4096, config.head_dim, "cuda")  # ampdoctor: expect[AMP141:info]


def empty_past(layers, batch, heads, length, head_dim):
    past_key_values = [
        (
            torch.zeros(batch, heads, length, head_dim, dtype=torch.float16),  # ampdoctor: expect[AMP141:info]
            torch.zeros(batch, heads, length, head_dim, dtype=torch.float16),  # ampdoctor: expect[AMP141:info]
        )
        for _ in range(layers)
    ]
    return past_key_values


def per_layer_cache(layers, batch, length, width):
    cache = []
    for _ in range(layers):
        cache.append({"k": torch.empty(batch, length, width, dtype=torch.bfloat16),  # ampdoctor: expect[AMP141:info]
                      "v": torch.empty(batch, length, width, dtype=torch.bfloat16)})  # ampdoctor: expect[AMP141:info]
    return cache


class BlockCache(nn.Module):
    def __init__(self, batch, length, heads, head_dim, dtype):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(batch, heads, length, head_dim, dtype=dtype), persistent=False)
        self.register_buffer("v_cache", torch.zeros(batch, heads, length, head_dim, dtype=dtype), persistent=False)


class Decoder(nn.Module):
    def __init__(self, n_layers, heads, head_dim):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(heads * head_dim, heads * head_dim) for _ in range(n_layers))
        self.heads, self.head_dim = heads, head_dim

    def setup_caches(self, batch, length, dtype=torch.bfloat16):
        for block in self.blocks:
            block.cache = BlockCache(batch, length, self.heads, self.head_dim, dtype)


def prefill(model, prompt):
    model.setup_caches(prompt.shape[0], 2048)  # ampdoctor: expect[AMP141:info]
    return model(prompt)
