import torch

from lm.model import Attention


def main(loader):
    model = Attention(64).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for x, mask in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, mask).float().square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
