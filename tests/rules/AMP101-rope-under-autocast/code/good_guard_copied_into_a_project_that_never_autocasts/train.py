# The project trains its models in fp32 with its own loop.
import importlib

import torch


def main(model_module: str, steps: int = 10):
    model = importlib.import_module(model_module).build()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(steps):
        batch = torch.randint(0, 1000, (4, 128))
        loss = model(batch).float().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    main("models.video")
