# The fix: the running loss is fp32, and each bf16 loss is upcast as it is added.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1).to(torch.bfloat16)
x, y = torch.randn(64, 8, dtype=torch.bfloat16), torch.randn(64, 1, dtype=torch.bfloat16)
val_loss = torch.zeros((), dtype=torch.float32)
with torch.no_grad():
    for step in range(400):
        val_loss += nn.functional.mse_loss(model(x), y).clamp(max=0.9).float()
