# A bf16 model whose position table follows the dtype of what it is given and is stored back
# (`self.table = self.table.to(dtype=embeds.dtype)`), fed embeddings computed in fp32 outside it: the table is cast
# up to meet them, so the sum reaching the bf16 norm is fp32 although the model made it so only by following its
# input. The inputs entered the model unconverted; casting them to bf16 fixes it.
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(16, 8), persistent=False)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 4)

    def forward(self, embeds):
        embeds = embeds * 2.0
        self.table = self.table.to(dtype=embeds.dtype)
        h = embeds + self.table[torch.arange(embeds.shape[1])]
        return self.head(self.norm(h))  # ampdoctor: expect[AMP131]


model = Encoder().to(torch.bfloat16)
embeds = torch.randn(2, 16, 8)
model(embeds).float().sum().backward()
