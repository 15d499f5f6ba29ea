# A causal mask filled with -inf (nanoGPT's attention) makes non-finite values on purpose: the scores that carry it
# are -inf and softmax turns them into exact zeros. Nothing here is a non-finite origin.
import math

import torch
from torch import nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim: int, seq: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq)).view(1, seq, seq))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        att = att.masked_fill(self.bias[:, : x.size(1), : x.size(1)] == 0, float("-inf"))
        return F.softmax(att, dim=-1) @ v


torch.manual_seed(0)
model = Attention(16, 8)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
loss = model(torch.randn(2, 8, 16)).pow(2).mean()
loss.backward()
optimizer.step()
