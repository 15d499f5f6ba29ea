# A cos/sin cache kept in fp32 on purpose, then cast to the activations' bf16 where it is applied: the product
# rounds the table exactly as a bf16 cache would (pytorch/torchtitan fixed this by applying the rotation in fp32).
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim, length, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        angles = torch.outer(torch.arange(length).float(), inv_freq).repeat(1, 2)
        self.register_buffer("cos_cached", angles.cos(), persistent=False)

    def forward(self, q):
        cos = self.cos_cached[: q.shape[0]].to(dtype=q.dtype)  # ampdoctor: expect[AMP002]
        return q * cos


model = nn.Sequential(nn.Linear(8, 8), Rotary(8, 512))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = model(torch.randn(512, 8))
out.float().pow(2).mean().backward()
optimizer.step()
