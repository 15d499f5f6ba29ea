# The trainer builds its model through a factory function of the package (`build_model`, as timm and detectron2
# spell it): the bf16 autocast reaches the model the factory constructs, and its rotary module.
import torch

from pkg.factory import build_model


def main(loader):
    model = build_model()
    optimizer = torch.optim.AdamW(model.parameters())
    for x, pos in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, pos).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
