# The fix of bad_optimizer_of_half_model_under_autocast.py: the model stays fp32 and autocast alone computes in bf16.
# A model cast to bf16 and only evaluated under autocast steps nothing; a half base whose trained parameters are
# upcast to fp32 before the optimizer has its master copy.
import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 4))

    def forward(self, x):
        return self.body(x)


def train(loader, steps: int = 100):
    model = Classifier().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5)
    for _, (x, y) in zip(range(steps), loader):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def evaluate(loader):
    model = Classifier().cuda().to(torch.bfloat16)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        return [model(x.cuda()).argmax(-1) for x, _ in loader]


def train_upcast(loader):
    model = Classifier().cuda().to(torch.bfloat16)
    model.float()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5)
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
