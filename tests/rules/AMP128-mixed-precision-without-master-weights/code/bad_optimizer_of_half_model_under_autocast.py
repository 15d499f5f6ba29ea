# A fine-tuning script that "uses mixed precision" twice: it casts the model to bf16 and also runs the forward under
# bf16 autocast. The optimizer then steps the bf16 parameters themselves: no fp32 master copy keeps small updates.
import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 4))

    def forward(self, x):
        return self.body(x)


def train(loader, steps: int = 100):
    model = Classifier().cuda().to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5)  # ampdoctor: expect[AMP128]
    for _, (x, y) in zip(range(steps), loader):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
