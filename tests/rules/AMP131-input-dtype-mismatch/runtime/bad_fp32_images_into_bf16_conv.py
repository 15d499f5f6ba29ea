# The model is cast to bf16 and run without autocast; the batch comes from the data pipeline in fp32 and nothing
# casts it ("Input type (float) and bias type (c10::BFloat16) should be the same").
import torch
from torch import nn


class Stem(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)

    def forward(self, images):
        h = self.conv(images)  # ampdoctor: expect[AMP131]
        return self.head(h.mean(dim=(2, 3)))


model = Stem().to(torch.bfloat16)
images = torch.randn(2, 3, 8, 8)
model(images).float().sum().backward()
