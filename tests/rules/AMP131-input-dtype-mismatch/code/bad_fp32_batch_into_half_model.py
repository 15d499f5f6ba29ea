# Hotshot-XL #44 / cellpose #1327 shape: the model is cast to half and run without autocast, and the batch is made
# by a factory in the default dtype (or upcast by .float()) with no cast to the model's dtype.
import numpy as np
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return self.conv(x)


model = Net().to("cuda").to(torch.bfloat16)
model.eval()
noise = torch.randn(2, 3, 64, 64, device="cuda")
with torch.no_grad():
    out = model(noise)  # ampdoctor: expect[AMP131:warning]

image = torch.from_numpy(np.zeros((1, 3, 64, 64))).float().to("cuda")
out = model.forward(image)  # ampdoctor: expect[AMP131:warning]

frames = torch.from_numpy(np.random.rand(4, 3, 64, 64)).to("cuda")
out = model(frames)  # ampdoctor: expect[AMP131:warning]
