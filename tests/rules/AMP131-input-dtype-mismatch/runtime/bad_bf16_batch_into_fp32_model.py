# The reverse: the batch was cast to bf16 for a model that stayed fp32, and no autocast runs the layer.
import torch
from torch import nn

model = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 2))
batch = torch.randn(4, 16).to(torch.bfloat16)
model(batch).sum().backward()  # ampdoctor: expect[AMP131]
