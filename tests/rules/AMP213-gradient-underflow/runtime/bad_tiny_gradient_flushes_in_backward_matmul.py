# A loss scaled down by 1e-38 (a wrong normalization) over a wide vocabulary: the cast of the logits' gradient to bf16
# keeps the few largest values, at the labels (most of its L2 mass), and flushes the rest; but those are so small
# that the head's bf16 matmul in backward turns them all into zeros, and no gradient reaches the body. Both are
# reported: the cast where it loses values (here the sampled values miss most labels), the matmul that loses the rest.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 4096))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, labels = torch.randn(32, 32), torch.randint(0, 4096, (32,))
with torch.autocast("cpu", dtype=torch.bfloat16):
    logits = model(x)  # ampdoctor: expect[AMP213]
loss = F.cross_entropy(logits.float(), labels) * 1e-38  # ampdoctor: expect[AMP213]
loss.backward()
optimizer.step()
