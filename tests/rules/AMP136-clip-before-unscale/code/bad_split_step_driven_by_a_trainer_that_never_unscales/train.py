import torch

from steps import Step

model = torch.nn.Linear(16, 16).cuda()
step = Step(model, torch.optim.AdamW(model.parameters(), lr=1e-4))
for _ in range(10):
    step.forward_backward(torch.randn(4, 16, device="cuda"))
    step.do_step()
