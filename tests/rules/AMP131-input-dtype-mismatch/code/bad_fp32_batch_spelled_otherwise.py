# Inference scripts feeding a half model: the cast sits inside a chain of module methods, and the batch is scaled by
# a Python number (which keeps the fp32 of `.float()`) or made by the legacy fp32 constructor.
import numpy as np
import torch
from torch import nn


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x):
        return self.body(x)


net = Denoiser().eval().half().cuda()
pixels = np.full((32, 32, 3), 128, dtype=np.uint8)
batch = torch.from_numpy(pixels).permute(2, 0, 1)[None].float().cuda() / 255.0
restored = net(batch * 2 - 1)  # ampdoctor: expect[AMP131:warning]
noise = torch.FloatTensor(np.random.randn(1, 3, 32, 32)).cuda()
restored = net(noise)  # ampdoctor: expect[AMP131:warning]
