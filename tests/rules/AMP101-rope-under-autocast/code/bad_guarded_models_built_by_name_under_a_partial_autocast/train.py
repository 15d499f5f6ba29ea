# The project builds its model by name and runs each step under a bf16 autocast made with functools.partial.
import importlib
from functools import partial

import torch


def main(model_module: str, steps: int = 10):
    model = importlib.import_module(model_module).build()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    amp_autocast = partial(torch.autocast, device_type="cuda", dtype=torch.bfloat16)
    for _ in range(steps):
        batch = torch.randint(0, 1000, (4, 128))
        with amp_autocast():
            loss = model(batch).float().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    main("models.video")
