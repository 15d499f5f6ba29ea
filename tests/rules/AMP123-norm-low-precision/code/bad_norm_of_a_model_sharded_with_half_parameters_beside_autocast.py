# A trainer that shards its model with FSDP parameters in fp16 and also enters fp16 autocast: autocast changes
# nothing of the weights FSDP has cast, so the embedding's rows, the residual adds and the squares of the norm's
# variance are fp16 (inf past |x| = 256).
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        var = (x * x).mean(-1, keepdim=True)  # ampdoctor: expect[AMP123:warning]
        return x * torch.rsqrt(var + self.eps) * self.weight


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 256, dim: int = 64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        h = self.embed(idx)
        return self.head(self.norm(h))


def main(loader):
    policy = MixedPrecision(param_dtype=torch.float16, reduce_dtype=torch.float32)
    model = FSDP(TinyLM().cuda(), mixed_precision=policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for idx, targets in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            logits = model(idx.cuda())
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.cuda().flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
