# The same retype stepped by AdamW: its step lerps the bf16 state towards the fp32 gradient and raises ("expected
# dtype c10::BFloat16 for `end` but got dtype float", torch 2.13): the run fails, an error at the cast.
import torch
from torch import nn

model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for micro_batch in range(2):
    loss = model(torch.randn(4, 8, dtype=torch.bfloat16)).float().pow(2).mean()
    loss.backward()
    for param in model.parameters():
        param.grad.data = param.grad.data.to(torch.float32)  # ampdoctor: expect[AMP003:error]
optimizer.step()
