import argparse

import torch

from model import UNet

parser = argparse.ArgumentParser()
parser.add_argument("--use_checkpoint", action="store_true")
args = parser.parse_args()
model = UNet(64, depth=4, use_checkpoint=args.use_checkpoint)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for _ in range(10):
    x = torch.randn(8, 64, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
