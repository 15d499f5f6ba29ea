# Autocast mixed precision keeps the weights fp32, so their gradients are fp32 already: retyping `.grad` to fp32
# is a no-op even though the file says bf16 (the autocast dtype).
import torch
from torch import nn

model = nn.Linear(16, 16).cuda()
optimizer = torch.optim.AdamW(model.parameters())
for step in range(8):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(torch.randn(4, 16, device="cuda")).pow(2).mean() / 2
    loss.backward()
    for p in model.parameters():
        p.grad.data = p.grad.data.float()
    if step % 2 == 1:
        optimizer.step()
        optimizer.zero_grad()
