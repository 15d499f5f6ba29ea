import torch

from engine import Engine

model = torch.nn.Linear(16, 4).cuda()
engine = Engine(model, torch.optim.AdamW(model.parameters(), lr=1e-4))
for _ in range(1000):
    engine.step(torch.randn(8, 16).cuda(), torch.randint(0, 4, (8,)).cuda())
