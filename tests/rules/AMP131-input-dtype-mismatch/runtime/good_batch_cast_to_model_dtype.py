# The batch is cast where it enters the half model: no mismatch, nothing to report.
import torch
from torch import nn


class Stem(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)

    def forward(self, images):
        h = self.conv(images.to(self.conv.weight.dtype))
        return self.head(h.mean(dim=(2, 3)))


model = Stem().to(torch.bfloat16)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(2, 3, 8, 8)).float().sum().backward()
optimizer.step()
