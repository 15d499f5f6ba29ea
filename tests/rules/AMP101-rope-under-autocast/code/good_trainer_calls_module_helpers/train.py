# `get_module` looks a submodule up and `load_module` imports one: helpers, not model factories, so nothing the
# utilities module defines (its rotary helper included) runs under the trainer's bf16 autocast.
import torch

from pkg.utils import get_module, load_module


def main(model, loader):
    encoder = get_module(model, "encoder")
    encoder.requires_grad_(False)
    load_module("configs.tiny")
    optimizer = torch.optim.AdamW(model.parameters())
    for x in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
