# The gradient, not the activation, leaves fp16's range: the forward is finite, but a loss multiplied by a large
# constant in fp32 sends a gradient of 1e6 back into the fp16 output, which the cast's backward makes inf (with
# no GradScaler to skip the step). AMP212's summary: "an activation or gradient exceeded ...".
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(16, 16).half()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(8, 16).half() * 0.1
out = model(x)
loss = out.float().sum() * 1e6  # ampdoctor: expect[AMP212]
loss.backward()
optimizer.step()
