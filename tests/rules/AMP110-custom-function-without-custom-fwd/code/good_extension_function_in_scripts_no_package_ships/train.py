import torch

from experts import ExpertsLayer


def main(loader):
    layer = ExpertsLayer(4, 64, 64).cuda()
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-4)
    for inp, counts in loader:
        loss = layer(inp, counts).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
