# The trainer imports the model in black's parenthesized form, over several lines, with comments that hold
# parentheses of their own: the bf16 autocast reaches the model file through it all the same.
import torch

from pkg.model import (  # the model (see pkg/model.py)
    TinyLM,  # the model this script trains (in bf16 autocast)
)


def main(loader):
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters())
    for x, pos in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, pos).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
