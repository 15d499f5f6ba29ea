# The same trainer, with a launcher that passes `--fp16`: a run of the project halves the rotary buffer.
import argparse

import torch

from lm.model import TinyLM

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=1e-4)
parser.add_argument("--fp16", action="store_true", help="pseudo-fp16: fp16 storage, fp32 math")
args = parser.parse_args()


def main(loader):
    model = TinyLM()
    if args.fp16:
        model = model.half()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    for x, pos in loader:
        loss = model(x, pos).float().square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
