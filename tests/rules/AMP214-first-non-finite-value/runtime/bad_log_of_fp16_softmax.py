# Cross-entropy written by hand over an fp16 softmax: probabilities below fp16's smallest subnormal round to 0, log(0)
# is -inf and 0 * -inf is NaN. The loss is NaN while every weight is finite; the first non-finite value is the log.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Linear(32, 100).half()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
x = torch.randn(8, 32).half() * 8
targets = F.one_hot(torch.randint(0, 100, (8,)), 100).half()
probs = torch.softmax(model(x), dim=-1)
loss = -(targets * probs.log()).sum(-1).float().mean()  # ampdoctor: expect[AMP214]
loss.backward()
optimizer.step()
