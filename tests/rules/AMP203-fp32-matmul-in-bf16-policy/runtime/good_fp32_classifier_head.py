# A two-class classifier kept in fp32 outside the bf16 autocast block: the loss is computed from it, but it narrows
# the hidden state to two scores, a negligible share of the step's matmuls at any model size (unlike a head onto a
# vocabulary): below the 1% share, no finding.
# ampdoctor: policy=bf16-mixed
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
body = nn.Sequential(nn.Linear(64, 1024), nn.GELU(), nn.Linear(1024, 64))
classifier = nn.Linear(64, 2)
optimizer = torch.optim.AdamW([*body.parameters(), *classifier.parameters()], lr=1e-3)
x, labels = torch.randn(16, 64), torch.randint(0, 2, (16,))
with torch.autocast("cpu", dtype=torch.bfloat16):
    h = body(x)
loss = F.cross_entropy(classifier(h.float()), labels)
loss.backward()
optimizer.step()
