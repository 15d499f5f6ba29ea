# A decoder that allocates its cache in fp32 while the file runs the model in fp16: the half keys are upcast into the
# cache and read back as fp32 beside fp16 queries, which SDPA refuses.
import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.cache_k = None
        self.cache_v = None

    def allocate(self, batch, length):
        shape = (batch, self.heads, length, self.qkv.in_features // self.heads)
        self.cache_k = torch.zeros(shape, dtype=torch.float32, device="cuda")  # ampdoctor: expect[AMP141:warning]
        self.cache_v = torch.zeros(shape, dtype=torch.float32, device="cuda")  # ampdoctor: expect[AMP141:warning]

    def forward(self, x, pos):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        self.cache_k[:, :, pos] = k
        self.cache_v[:, :, pos] = v
        return F.scaled_dot_product_attention(q, self.cache_k[:, :, : pos + 1], self.cache_v[:, :, : pos + 1])


def generate(tokens, layers):
    past = torch.ones(layers, 2, tokens.shape[0], dtype=torch.float32) if tokens.numel() else None  # ampdoctor: expect[AMP141:warning]
    return past


model = Attention(512, 8).cuda().half()
