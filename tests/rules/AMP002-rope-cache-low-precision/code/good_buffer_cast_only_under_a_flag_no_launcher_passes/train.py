# The trainer casts the model, buffers included, to fp16 only under `--fp16`, a store_true flag that neither of
# the project's launchers passes: the rotary buffer is halved only in a run the project does not make (a note).
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
