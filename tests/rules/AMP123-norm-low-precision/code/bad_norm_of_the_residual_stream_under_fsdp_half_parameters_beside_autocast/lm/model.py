# The residual-stream RMSNorm of the good fixture under fp16 autocast, but the trainer shards the model with FSDP
# parameters in fp16 (`MixedPrecision(param_dtype=torch.float16)`): the weights the forward uses are fp16, so the
# embedding's rows and every add of the stream are fp16, and so are the squares of the variance (inf past |x| = 256).
import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        var = (x * x).mean(-1, keepdim=True)  # ampdoctor: expect[AMP123:warning]
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
