# Modalities PR #464: FSDP2's MixedPrecisionPolicy casts the parameters but installs no autocast, so
# cross-entropy runs on bf16 logits and the loss is quantized to the bf16 grid.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(128, 32), nn.Linear(32, 128)).to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
idx = torch.randint(0, 128, (4, 8))
logits = model(idx)
loss = F.cross_entropy(logits.view(-1, 128), idx.roll(-1, 1).view(-1))  # ampdoctor: expect[AMP125]
loss.backward()
optimizer.step()
