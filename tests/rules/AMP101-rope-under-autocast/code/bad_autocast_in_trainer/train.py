# The model file never says its precision: this trainer runs it under bf16 autocast.
import torch

from pkg.model import TinyLM


def main(loader):
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters())
    for x, pos in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, pos).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
