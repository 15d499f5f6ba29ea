# A LoRA layer written for fp32 adapters upcasts its input for them; the whole model was then cast to bf16 (adapters
# included) and runs without autocast: the fp32 input meets the bf16 adapter weights.
import torch
from torch import nn


class LoraLinear(nn.Module):
    def __init__(self, dim, rank=4):
        super().__init__()
        self.base = nn.Linear(dim, dim)
        self.lora_A = nn.Linear(dim, rank, bias=False)
        self.lora_B = nn.Linear(rank, dim, bias=False)

    def forward(self, x):
        delta = self.lora_B(self.lora_A(x.float()))  # ampdoctor: expect[AMP127]
        return self.base(x) + delta.to(x.dtype)


model = nn.Sequential(nn.Linear(16, 16), LoraLinear(16)).to(torch.bfloat16)
model(torch.randn(4, 16, dtype=torch.bfloat16)).float().sum().backward()
