# Additive masks that follow the model's dtype, and masks that are no additive masks: nothing to report.
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, attention, size, length):
        super().__init__()
        self.attention = attention
        self.size = size
        # a buffer: the model's half cast casts it with the weights
        self.register_buffer("causal", torch.full((length, length), float("-inf")).triu(1))

    def window_mask(self, height, width, dtype):
        regions = torch.zeros((1, height, width, 1), dtype=dtype)
        regions[:, : height // 2] = 1
        mask = regions.view(1, -1, 1) - regions.view(1, 1, -1)
        return mask.masked_fill(mask != 0, -100.0)

    def padding_bias(self, keep, dtype=torch.float16):
        return (1.0 - keep[:, None, None, :].to(dtype)) * torch.finfo(dtype).min

    def forward(self, x, keep):
        b, h, w, c = x.shape
        attn_mask = self.window_mask(h, w, dtype=x.dtype)  # made in the hidden states' dtype
        out = self.attention(x.view(b, -1, c), attn_mask)
        bias = self.padding_bias(keep, x.dtype)  # the caller gives the dtype
        out = self.attention(out, attention_mask=bias)
        late = self.padding_bias(keep).to(x.dtype)  # cast to the model's dtype before it is handed over
        out = self.attention(out, attention_mask=late)
        out = self.attention(out, attention_mask=self.causal[: out.shape[1], : out.shape[1]])
        ones = torch.ones(b, h * w, device=x.device)  # a 0/1 mask: the attention makes its bias in its own dtype
        return self.attention(out, attention_mask=ones)



class ShiftedWindows(nn.Module):
    def __init__(self, attention, height, width, size):
        super().__init__()
        self.attention = attention
        # built once and kept as a buffer: the model's half cast casts it with the weights
        regions = torch.zeros((1, height, width, 1))
        regions[:, height // 2:, width // 2:, :] = 1
        windows = regions.view(-1, size * size)
        attn_mask = windows.unsqueeze(1) - windows.unsqueeze(2)
        attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0))
        self.register_buffer("attn_mask", attn_mask)

    def forward(self, x):
        return self.attention(x, self.attn_mask)


class CausalSelfAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        t = x.shape[1]
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
        future = torch.full((t, t), float("-inf"), device=x.device, dtype=scores.dtype).triu(1)  # in the scores' dtype
        scores = scores + future
        offsets = torch.arange(t, device=x.device)[None, :] - torch.arange(t, device=x.device)[:, None]
        scores = scores + offsets.abs().to(scores.dtype) * -0.1  # a position bias, no mask
        return scores.softmax(-1) @ v


class Fp32Scores(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        t = x.shape[1]
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q.float() @ k.float().transpose(-2, -1)  # attention computed in fp32 on purpose
        scores = scores + torch.full((t, t), float("-inf"), device=x.device).triu(1)
        return (scores.softmax(-1) @ v.float()).to(x.dtype)


class ScoresCastBack(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        t = x.shape[1]
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = torch.matmul(q, k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1).to(x.device)
        scores = scores + mask  # promoted to fp32 on purpose: the softmax runs in fp32
        probs = torch.softmax(scores, dim=-1).type_as(v)  # and is cast back before the product with the values
        return probs @ v
