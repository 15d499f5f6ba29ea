# Pure bf16 weights with 2 accumulated micro-batches: the .grad sum is bf16 (a note: the weights are bf16 too;
# microsoft/DeepSpeed#2768 describes the same rounding).
import torch
from torch import nn

model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for micro_batch in range(2):
    loss = model(torch.randn(4, 8, dtype=torch.bfloat16)).float().pow(2).mean() / 2
    loss.backward()
optimizer.step()  # ampdoctor: expect[AMP117]
optimizer.zero_grad()
