# fp16 autocast with no GradScaler (engichang1467/Open-Rig3R#35): a loss term weighted 1e-4 and averaged over 8x512
# outputs has gradients of ~1e-8, below fp16's smallest subnormal, so the backward cast to fp16 rounds them to zero.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 512))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(8, 64), torch.randn(8, 512)
with torch.autocast("cpu", dtype=torch.float16):
    out = model(x)
loss = 1e-4 * F.mse_loss(out.float(), y)  # ampdoctor: expect[AMP213]
loss.backward()
optimizer.step()
