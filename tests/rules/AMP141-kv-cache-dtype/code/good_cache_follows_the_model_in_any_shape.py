# The same shapes with the cache in the model's dtype: moved but not cast, cast to the keys, per-layer tensors in the
# weights' dtype, a class given the model's dtype, a method that reads the weights' dtype when its caller gives none;
# and an int8 cache, quantized on purpose.
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, heads, max_batch, max_len):
        super().__init__()
        self.wqkv = nn.Linear(dim, 3 * dim)
        self.cache_k = torch.zeros((max_batch, max_len, heads, dim // heads)).cuda()
        self.cache_v = torch.zeros(max_batch, max_len, heads, dim // heads).to(self.wqkv.weight)

    def forward(self, x, pos, k):
        self.cache_k = self.cache_k.to(k)
        self.cache_k[:, pos] = k
        return self.cache_k


class LayerCache:
    def __init__(self, layers, batch, heads, length, head_dim, device, dtype):
        self.dtype = dtype
        shape = (batch, heads, length, head_dim)
        self.key_cache, self.value_cache = [], []
        for _ in range(layers):
            self.key_cache.append(torch.zeros(shape, dtype=self.dtype, device=device))
            self.value_cache.append(torch.zeros(shape, dtype=self.dtype, device=device))


def start_generation(model, config, batch):
    return LayerCache(config.layers, batch, config.heads, 4096, config.head_dim, "cuda", dtype=model.dtype)


def empty_past(model, layers, batch, heads, length, head_dim):
    dtype = next(model.parameters()).dtype
    past_key_values = [
        (torch.zeros(batch, heads, length, head_dim, dtype=dtype), torch.zeros(batch, heads, length, head_dim, dtype=dtype))
        for _ in range(layers)
    ]
    quantized = {"k": torch.zeros(batch, length, dtype=torch.int8)}
    return past_key_values, quantized


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

    def setup_caches(self, batch, length, dtype=None):
        dtype = dtype or self.blocks[0].weight.dtype
        for block in self.blocks:
            block.cache = BlockCache(batch, length, self.heads, self.head_dim, dtype)

    def setup_given(self, batch, length, dtype):
        for block in self.blocks:
            block.cache = BlockCache(batch, length, self.heads, self.head_dim, dtype)


def prefill(model, prompt):
    model.setup_caches(prompt.shape[0], 2048)
    model.setup_given(prompt.shape[0], 2048, model.blocks[0].weight.dtype)
    return model(prompt)


def cache_like_the_keys(batch, length, width, keys):
    # allocated fp32, then given the keys' dtype by `.to(keys)`: it follows them
    k_cache = torch.zeros(batch, length, width, dtype=torch.float32).to(keys)
    return k_cache
