# An fp32 model whose loop writes `.grad` back as fp32 (a defensive cast): the retype is a no-op, nothing in this
# file trains in half precision, so the next backward accumulates fine.
import torch
from torch import nn

model = nn.Linear(16, 16)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    loss.backward()
    for p in model.parameters():
        p.grad = p.grad.to(torch.float32)
    optimizer.step()
    optimizer.zero_grad()
