# pytorch/examples #1196: clip_grad_norm_ runs on the gradients the GradScaler multiplied by its scale.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
x, y = torch.randn(8, 16), torch.randn(8, 4)
with torch.autocast("cpu", dtype=torch.float16):
    loss = nn.functional.mse_loss(model(x).float(), y)
scaler.scale(loss).backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # ampdoctor: expect[AMP136]
scaler.step(optimizer)
scaler.update()
