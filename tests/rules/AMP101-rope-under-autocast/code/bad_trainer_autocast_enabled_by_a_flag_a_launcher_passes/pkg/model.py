from torch import nn

from .rope import RotaryEmbedding


class TinyLM(nn.Module):
    def __init__(self, dim: int = 64):
        super().__init__()
        self.rotary = RotaryEmbedding(dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, position_ids):
        cos, sin = self.rotary(position_ids)
        return self.proj(x * cos + x * sin)
