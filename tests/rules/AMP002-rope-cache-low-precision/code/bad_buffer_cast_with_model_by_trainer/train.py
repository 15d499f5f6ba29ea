# The buffer is fp32 where it is built; this trainer's `.to(torch.bfloat16)` casts it with the weights.
import torch

from lm.model import TinyLM


def main(loader):
    model = TinyLM().to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for x, pos in loader:
        loss = model(x, pos).float().square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
