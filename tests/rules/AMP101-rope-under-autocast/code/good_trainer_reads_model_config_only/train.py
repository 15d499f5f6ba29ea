# The trainer only reads a class attribute of the package's model (its default width) and trains a model of its
# own under bf16 autocast: nothing of the package's model, nor its rotary module, is run under it.
import torch
from torch import nn

from pkg.model import TinyLM


def main(loader):
    model = nn.Linear(TinyLM.default_dim(), 64)
    optimizer = torch.optim.AdamW(model.parameters())
    for x in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
