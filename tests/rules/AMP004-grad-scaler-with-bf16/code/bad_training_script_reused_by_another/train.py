# A training script whose loop is its `__main__` block, and which another training script imports to reuse its
# model: being imported does not make this loop a hand-run self-check, it is how this script trains (in bf16 weights,
# whose gradients the scaler cannot unscale).
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))

    def forward(self, x):
        return self.body(x)


if __name__ == "__main__":
    model = Net().cuda().to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.cuda.amp.GradScaler(enabled=True)  # ampdoctor: expect[AMP004]
    for step in range(1000):
        x = torch.randn(8, 64, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
