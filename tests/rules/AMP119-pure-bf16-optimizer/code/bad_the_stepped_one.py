# Two optimizers: one only loads a checkpoint, the other trains the bf16 weights and must not be missed
# (pytorch/ao PR #1124: updates below ~1e-3 of a weight round away in bf16).
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)


model = Net().to(torch.bfloat16)
restored = torch.optim.SGD(model.parameters(), lr=0.1)
restored.load_state_dict(torch.load("old.pt"))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)  # ampdoctor: expect[AMP119]
for _ in range(10):
    model(torch.randn(2, 8, dtype=torch.bfloat16)).float().sum().backward()
    optimizer.step()
    optimizer.zero_grad()
