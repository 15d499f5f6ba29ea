# Under fp16 autocast alone, a norm applied to the first element of the tuple an attention block returns (output,
# weights): the output comes from its last projection, a linear layer autocast runs in fp16, so the squares of the
# variance are fp16 (inf past |x| = 256).
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


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        w = (q @ k.transpose(-1, -2)).softmax(-1)
        return self.proj(w @ v), w


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.attn = Attention(dim)
        self.post_attn_norm = RMSNorm(dim)

    def forward(self, x):
        out = self.attn(x)[0]
        return x + self.post_attn_norm(out)


class LM(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.embed = nn.Embedding(256, dim)
        self.block = Block(dim)

    def forward(self, idx):
        return self.block(self.embed(idx))


def main(loader):
    model = LM().cuda()
    opt = torch.optim.AdamW(model.parameters())
    for idx in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(idx).float().mean()
        loss.backward()
        opt.step()
