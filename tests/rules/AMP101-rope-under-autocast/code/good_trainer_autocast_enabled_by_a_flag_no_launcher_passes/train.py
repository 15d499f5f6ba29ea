# The trainer's bf16 autocast is on only with `--amp`, a store_true flag that neither launcher of the project
# passes: the rotary angles run under autocast only in a run the project does not make (a note).
import argparse

import torch

from pkg.model import TinyLM

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=3e-4)
parser.add_argument("--amp", action="store_true", help="train under bf16 autocast")
args = parser.parse_args()


def main(loader):
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    for x, pos in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.amp):
            loss = model(x, pos).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
