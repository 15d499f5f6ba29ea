# The input is cast to the adapter's own dtype where it enters the adapter, whatever that dtype is.
import torch
from torch import nn


class LoraLinear(nn.Module):
    def __init__(self, dim, rank=4):
        super().__init__()
        self.base = nn.Linear(dim, dim)
        self.lora_A = nn.Linear(dim, rank, bias=False)
        self.lora_B = nn.Linear(rank, dim, bias=False)

    def forward(self, x):
        delta = self.lora_B(self.lora_A(x.to(self.lora_A.weight.dtype)))
        return self.base(x) + delta.to(x.dtype)


model = nn.Sequential(nn.Linear(16, 16), LoraLinear(16)).to(torch.bfloat16)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(4, 16, dtype=torch.bfloat16)).float().sum().backward()
optimizer.step()
