# The fix of Modalities PR #464: the bf16 logits are upcast before the loss, which is then fp32.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(128, 32), nn.Linear(32, 128)).to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
idx = torch.randint(0, 128, (4, 8))
logits = model(idx)
loss = F.cross_entropy(logits.float().view(-1, 128), idx.roll(-1, 1).view(-1))
loss.backward()
optimizer.step()
