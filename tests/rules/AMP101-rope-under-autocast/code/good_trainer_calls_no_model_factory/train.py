# The trainer takes only the optimizer factory and a name helper (`get_model_id`, which returns a string) of that
# module, and trains a model of its own: its bf16 autocast runs nothing the package's model factory builds, so the
# rotary module is not run under it.
import torch
from torch import nn

from pkg.factory import build_optimizer, get_model_id


def main(loader, path):
    print(get_model_id(path))
    model = nn.Linear(64, 64)
    optimizer = build_optimizer(model.parameters())
    for x in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
