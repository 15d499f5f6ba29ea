# The output head run in fp32 outside the bf16 autocast block (`head(h.float())`), in a model whose wide MLP leaves the
# head well under 1% of the step's matmul FLOPs at this vocabulary. The head's share grows with the vocabulary (a
# fifth of the step at a real one): the matmul the loss is computed from is reported whatever its share here.
# ampdoctor: policy=bf16-mixed
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
body = nn.Sequential(nn.Linear(64, 16384), nn.GELU(), nn.Linear(16384, 64))
head = nn.Linear(64, 128)
optimizer = torch.optim.AdamW([*body.parameters(), *head.parameters()], lr=1e-3)
x, labels = torch.randn(16, 64), torch.randint(0, 128, (16,))
with torch.autocast("cpu", dtype=torch.bfloat16):
    h = body(x)
logits = head(h.float())  # ampdoctor: expect[AMP203]
loss = F.cross_entropy(logits, labels)
loss.backward()
optimizer.step()
