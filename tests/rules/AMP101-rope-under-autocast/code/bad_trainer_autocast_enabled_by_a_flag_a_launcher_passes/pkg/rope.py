import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, position_ids):
        freqs = self.inv_freq[None, :, None].float() @ position_ids[:, None, :].float()  # ampdoctor: expect[AMP101]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()
