# The trainer's parenthesized import names a helper only: its bf16 autocast runs a model of its own, and the rotary
# module of the package, which nothing it builds uses, is not run under it.
import torch
from torch import nn

from pkg.util import (
    seed_everything,
)


def main(loader):
    seed_everything(0)
    model = nn.Linear(64, 64)
    optimizer = torch.optim.AdamW(model.parameters())
    for x in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
