# The trainer builds its model with the class's loader (`TinyLM.from_pretrained(...)`, as HF and diffusers models
# are built): the bf16 autocast reaches the model class and its rotary module as a constructor call would.
import torch

from pkg.model import TinyLM


def main(loader, path):
    model = TinyLM.from_pretrained(path)
    optimizer = torch.optim.AdamW(model.parameters())
    for x, pos in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, pos).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
