import torch

from amp import amp_context

model = torch.nn.Linear(16, 4).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for _ in range(1000):
    with amp_context("cuda", use_autocast=True):
        loss = torch.nn.functional.cross_entropy(model(torch.randn(8, 16).cuda()), torch.randint(0, 4, (8,)).cuda())
    loss.backward()
    opt.step()
    opt.zero_grad()
