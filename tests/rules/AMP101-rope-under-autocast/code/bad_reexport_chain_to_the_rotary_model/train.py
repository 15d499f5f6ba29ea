# The same chain of re-exports, to the rotary model the trainer builds: its bf16 autocast reaches the module three
# packages down, and the angles there.
import torch

from pkg import RotaryLM


def main(loader):
    model = RotaryLM()
    optimizer = torch.optim.AdamW(model.parameters())
    for x, pos in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, pos).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
