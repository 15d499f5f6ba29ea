# transformers PR #8561: a bf16 running loss reaches 256, where bf16 values are 2 apart, and from then on every
# loss below 1 is dropped: the logged average falls as the steps go on.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 1).to(torch.bfloat16)
x, y = torch.randn(64, 8, dtype=torch.bfloat16), torch.randn(64, 1, dtype=torch.bfloat16)
val_loss = torch.zeros((), dtype=torch.bfloat16)
with torch.no_grad():
    for step in range(400):
        val_loss += nn.functional.mse_loss(model(x), y).clamp(max=0.9)  # ampdoctor: expect[AMP137]
