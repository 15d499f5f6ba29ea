# The fix: log_softmax in fp32 never takes the log of a rounded-away probability.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Linear(32, 100).half()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
x = torch.randn(8, 32).half() * 8
labels = torch.randint(0, 100, (8,))
loss = F.cross_entropy(model(x).float(), labels)
loss.backward()
optimizer.step()
