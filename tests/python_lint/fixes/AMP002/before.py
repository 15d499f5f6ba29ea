import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, max_positions=4096, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_positions).float()
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        # cached in the model's dtype to save memory
        self.register_buffer("cos_cached", emb.cos().bfloat16(), persistent=False)
        self.register_buffer("sin_cached", emb.sin().to(torch.bfloat16), persistent=False)

    def forward(self, x, seq_len):
        return (
            self.cos_cached[:seq_len].to(dtype=x.dtype),
            self.sin_cached[:seq_len].to(x.device).to(x.dtype),
        )
