# The trainer takes its model through a chain of package re-exports (`pkg` -> `pkg.models` -> `pkg.models.lm`, as
# diffusers exports its models): its bf16 autocast reaches the module that defines the model, not every module the
# last package re-exports beside it (the rotary model here, which this script never builds).
import torch

from pkg import TinyLM


def main(loader):
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters())
    for x in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
