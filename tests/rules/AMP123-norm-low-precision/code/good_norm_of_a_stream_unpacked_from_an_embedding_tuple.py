# Under fp16 autocast alone, a norm of what an embedding module returns first in a tuple (token rows plus position
# rows, and the positions): embedding rows are fp32 under autocast, so is their sum, and so is the variance.
import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        var = (x * x).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


class Embeddings(nn.Module):
    def __init__(self, vocab, dim, length):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(length, dim)

    def forward(self, idx):
        pos = torch.arange(idx.shape[-1], device=idx.device)
        return self.tokens(idx) + self.positions(pos), pos


class LM(nn.Module):
    def __init__(self, vocab=256, dim=64, length=128):
        super().__init__()
        self.embed = Embeddings(vocab, dim, length)
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        h, _ = self.embed(idx)
        return self.head(self.norm(h))


def main(loader):
    model = LM().cuda()
    opt = torch.optim.AdamW(model.parameters())
    for idx in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(idx).float().mean()
        loss.backward()
        opt.step()
