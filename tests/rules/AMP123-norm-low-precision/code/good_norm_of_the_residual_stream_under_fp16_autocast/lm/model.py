# A hand-written RMSNorm that squares in its input's dtype, applied to the residual stream only. The model's
# parameters stay fp32 (the trainer autocasts and never casts the model), and autocast leaves adds and multiplies
# alone: the stream is fp32 from the embedding on (fp32 + half promotes to fp32), so the variance is fp32. (A block's
# input is its caller's, which the rule does not follow: a note says when the norm would be half, never a warning.)
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


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm_1 = RMSNorm(dim)
        self.fc_in = nn.Linear(dim, 4 * dim)
        self.fc_out = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.fc_out(torch.relu(self.fc_in(self.norm_1(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 256, dim: int = 64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.block = Block(dim)
        self.norm_f = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        h = self.embed(idx)
        h = h + self.block(h)
        return self.head(self.norm_f(h))
