# A module whose speed test at the bottom trains it under bf16 autocast: that autocast is no part of the class, and
# a script that builds the class runs nothing under it.
import torch
from torch import nn


class ControlNet(nn.Module):
    def __init__(self, dim: int = 64):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)


if __name__ == "__main__":
    net = ControlNet().cuda()
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    for _ in range(10):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = net(torch.randn(8, 64, device="cuda")).float().square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
