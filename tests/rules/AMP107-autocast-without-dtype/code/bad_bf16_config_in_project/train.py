# The script never names a dtype; the project's config trains in bf16, so fp16 autocast contradicts it.
import json

import torch


def main(model, loader, optimizer):
    config = json.load(open("ds_config.json"))
    for x, y in loader:
        with torch.autocast("cuda"):  # ampdoctor: expect[AMP107]
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    return config
