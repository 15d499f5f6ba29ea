# Softmax attention (queries times keys, probabilities times values), linear attention computed in fp32 with autocast
# off, and one on fp32 operands: no key-value sum in half precision.
import torch
from torch import nn


class Attention(nn.Module):
    def forward(self, q, k, v):
        scores = q @ k.transpose(-2, -1)
        probs = scores.softmax(-1)
        return torch.einsum("bhij,bhjd->bhid", probs, v)


class LinearAttention(nn.Module):
    def forward(self, q, k, v):
        dtype = v.dtype
        with torch.autocast("cuda", enabled=False):
            kv = k.float().transpose(-1, -2) @ v.float()
            out = q.float() @ kv
        context = torch.einsum("bnd,bne->bde", k.float(), v.float())
        return out.to(dtype) + context.sum()


def train(model, batches):
    for x in batches:
        with torch.autocast("cuda"):
            model(x, x, x).mean().backward()


class ScaledLinearAttention(nn.Module):
    def forward(self, q, k, v):
        n = k.shape[-1]
        v = v / n
        context = torch.einsum("bhdn,bhen->bhde", k, v)
        return torch.einsum("bhde,bhdn->bhen", context, q)


class SoftmaxKernelAttention(nn.Module):
    def forward(self, q, k, v):
        # keys normalised over the positions: each context entry is a weighted mean of values
        q = q.softmax(dim=-2)
        k = k.softmax(dim=-1)
        context = torch.einsum("bhdn,bhen->bhde", k, v)
        return torch.einsum("bhde,bhdn->bhen", context, q)


class ChannelAttention(nn.Module):
    def forward(self, q, k, v):
        # channel attention: keys times values are scores over channels, softmaxed like any attention scores
        attn = k.transpose(-1, -2) @ v
        attn = attn.softmax(dim=-1)
        return attn @ q.transpose(-1, -2)


def chunked_recurrence(q, k, v, state, chunk):
    # a recurrence's per-chunk product: bounded by the chunk's length
    for i in range(0, k.shape[-2], chunk):
        k_i, v_i = k[..., i : i + chunk, :], v[..., i : i + chunk, :]
        state = state + k_i.transpose(-1, -2) @ v_i
    return q @ state


def decode_step(r, k, v, state, decay):
    # one position: the product sums a single term
    length = k.shape[-2]
    if length == 1:
        kv = k.mT @ v
        return r @ (state + kv), decay * state + kv
    return r @ state, state
