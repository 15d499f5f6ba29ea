# Linear attention over a feature map trained under fp16 autocast: the key-value context sums h*w products per entry,
# which passes fp16's 65504 on large maps and turns the output into NaN.
import torch
import torch.nn.functional as F
from torch import nn


class LinearAttention(nn.Module):
    def __init__(self, dim, heads=4):
        super().__init__()
        self.heads = heads
        self.to_qkv = nn.Conv2d(dim, dim * 3, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.to_qkv(x).reshape(b, 3, self.heads, -1, h * w).unbind(1)
        q, k = F.relu(q), F.relu(k)
        kv = k @ v.transpose(-1, -2)  # ampdoctor: expect[AMP212:warning]
        context = torch.einsum("bhdn,bhen->bhde", k, v)  # ampdoctor: expect[AMP212:warning]
        out = torch.einsum("bhde,bhdn->bhen", context, q)
        return out.reshape(b, c, h, w) + kv.sum()


class ReluAttention(nn.Module):
    def forward(self, q, k, v):
        kv = k.transpose(-1, -2) @ v  # ampdoctor: expect[AMP212:warning]
        return q @ kv


def train(model, batches, optimizer):
    for x in batches:
        with torch.autocast("cuda"):
            loss = model(x).mean()
        loss.backward()
        optimizer.step()
