# The fix: a GradScaler multiplies the loss (65536 to start) so the same gradients are representable in fp16, and
# divides them back in fp32 before the step.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 512))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu")
x, y = torch.randn(8, 64), torch.randn(8, 512)
with torch.autocast("cpu", dtype=torch.float16):
    out = model(x)
loss = 1e-4 * F.mse_loss(out.float(), y)
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
