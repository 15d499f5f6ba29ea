# The attention scores are computed and filled inside an fp32 island of the fp16 autocast: the projections take the
# upcast input with their fp32 weights, so the product is fp32 there, and float32's minimum fits it.
import torch
from torch import nn


class PoolingAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.q, self.k = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, x, pad):
        with torch.autocast("cuda", enabled=False):
            q, k = self.q(x.float()), self.k(x.float())
            scores = q @ k.transpose(-2, -1)
            scores = scores.masked_fill(pad, torch.finfo(torch.float32).min)
            return scores.softmax(-1) @ x.float()


def train_step(model, batch, opt, scaler):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(batch.tokens, batch.pad).square().mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
