# The same model, trained in fp32: nothing in the project runs it under autocast.
import torch

from pkg.model import TinyLM


def main(loader):
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters())
    for x, pos in loader:
        loss = model(x, pos).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
