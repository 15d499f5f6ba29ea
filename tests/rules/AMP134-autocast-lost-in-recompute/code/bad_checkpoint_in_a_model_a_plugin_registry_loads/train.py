import torch

from pkg import models


def main(loader):
    model = models.build_model("encoder")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for x in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
