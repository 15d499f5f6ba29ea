# One script defines the model and trains it, with no autocast and no half cast: it has chosen fp32 for this model,
# whose attention scores hold -1e9.
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1)
        scores = scores.masked_fill(mask, -1e9)
        return scores.softmax(-1) @ v


def train(loader):
    model = Attention(64).cuda()
    opt = torch.optim.AdamW(model.parameters())
    for x, mask, y in loader:
        loss = (model(x, mask) - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
