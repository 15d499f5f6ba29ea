# sd_dreambooth_extension PR #1415: the EMA copy of a bf16 model is updated in bf16, and a decay of 0.999 moves
# each weight by a thousandth of its distance to the model: below half a bf16 ulp, so nothing changes.
import copy

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).to(torch.bfloat16)
ema = copy.deepcopy(model).requires_grad_(False)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
x, y = torch.randn(16, 32, dtype=torch.bfloat16), torch.randn(16, 8, dtype=torch.bfloat16)
loss = nn.functional.mse_loss(model(x).float(), y.float())
loss.backward()
optimizer.step()
with torch.no_grad():
    for e, p in zip(ema.parameters(), model.parameters()):
        e.lerp_(p, 1 - 0.999)  # ampdoctor: expect[AMP138]
