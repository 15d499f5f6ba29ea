import fire
import torch

from engine import Engine


def main(steps=1000, use_amp=False):
    model = torch.nn.Linear(16, 4).cuda()
    engine = Engine(model, torch.optim.AdamW(model.parameters(), lr=1e-4), use_amp=use_amp)
    for _ in range(steps):
        engine.step(torch.randn(8, 16).cuda(), torch.randint(0, 4, (8,)).cuda())


if __name__ == "__main__":
    fire.Fire(main)
