# A script outside the project's package (scripts/ has no __init__.py) puts the project folder on sys.path and
# imports the package's model: the bf16 autocast reaches the model and its rotary module, although the project
# folder is a package itself.
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from models.model import TinyLM  # noqa: E402


def main(loader):
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters())
    for x, pos in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, pos).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
