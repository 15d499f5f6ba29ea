# The trainer takes only the optimizer factory of that module, and trains a model of its own: its bf16 autocast
# runs nothing the package's model factory builds, so the rotary module is not run under it.
import torch
from torch import nn

from pkg.factory import build_optimizer


def main(loader):
    model = nn.Linear(64, 64)
    optimizer = build_optimizer(model.parameters())
    for x in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
