# A shifted-window attention whose additive mask a helper builds with `torch.zeros` (no dtype: the default float32)
# and fills with -100 at every call: in a model run in fp16 or bf16 without autocast, the fp32 mask promotes the
# half scores it is added to, and the product with the half values fails.
import torch
from torch import nn


def to_windows(x, size):
    b, h, w, c = x.shape
    x = x.view(b, h // size, size, w // size, size, c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, size * size, c)


class WindowAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, attn_mask=None):
        n, t, c = x.shape
        q, k, v = self.qkv(x).view(n, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
        if attn_mask is not None:
            scores = scores + attn_mask.unsqueeze(1).repeat(n // attn_mask.shape[0], 1, 1, 1)
        return self.proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(n, t, c))


class ShiftedBlock(nn.Module):
    def __init__(self, dim, heads, size, shift):
        super().__init__()
        self.size, self.shift = size, shift
        self.attention = WindowAttention(dim, heads)

    def window_mask(self, height, width):
        if self.shift == 0:
            return None
        regions = torch.zeros((1, height, width, 1))  # ampdoctor: expect[AMP122:info]
        label = 0
        for hs in (slice(0, -self.size), slice(-self.size, -self.shift), slice(-self.shift, None)):
            for ws in (slice(0, -self.size), slice(-self.size, -self.shift), slice(-self.shift, None)):
                regions[:, hs, ws, :] = label
                label += 1
        windows = to_windows(regions, self.size).squeeze(-1)
        mask = windows.unsqueeze(1) - windows.unsqueeze(2)
        return mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)

    def forward(self, x):
        b, h, w, c = x.shape
        shifted = torch.roll(x, (-self.shift, -self.shift), (1, 2))
        windows = to_windows(shifted, self.size)
        attn_mask = self.window_mask(h, w)
        if attn_mask is not None:
            attn_mask = attn_mask.to(x.device)
        out = self.attention(windows, attn_mask)
        return out.view(b, h, w, c)
