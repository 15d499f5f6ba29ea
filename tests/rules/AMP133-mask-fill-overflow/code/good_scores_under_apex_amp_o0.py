# apex's amp.initialize at opt_level O0 is plain fp32 training: the attention scores are fp32 and hold -1e9.
import torch
from apex import amp
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
    model, opt = amp.initialize(model, opt, opt_level="O0")
    for x, mask, y in loader:
        loss = (model(x, mask) - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
