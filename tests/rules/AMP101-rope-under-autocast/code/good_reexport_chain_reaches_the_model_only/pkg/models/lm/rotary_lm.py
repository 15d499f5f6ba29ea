import torch
from torch import nn


class RotaryLM(nn.Module):
    def __init__(self, dim: int = 64, base: float = 10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, dim, 2).float() / dim), persistent=False)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, position_ids):
        freqs = self.inv_freq[None, :, None].float() @ position_ids[:, None, :].float()
        emb = torch.cat((freqs, freqs), dim=-1)
        return self.proj(x * emb.cos() + x * emb.sin())
