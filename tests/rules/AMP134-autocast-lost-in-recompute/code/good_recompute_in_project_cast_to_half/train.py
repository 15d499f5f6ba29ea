import torch

from layers import Block

model = Block(64).cuda().half()
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
for _ in range(10):
    x = torch.randn(8, 64, device="cuda", dtype=torch.float16, requires_grad=True)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
