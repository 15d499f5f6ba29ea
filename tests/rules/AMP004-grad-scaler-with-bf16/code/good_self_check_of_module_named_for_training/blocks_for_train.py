# A network module named for the training that builds it (`blocks_for_train.py`): a library of train.py, not a
# training script; its `__main__` pseudo-training loop is a self-check run by hand, and the scaler there is never
# part of the training, which is train.py's.
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)


if __name__ == "__main__":
    block = Block().cuda().to(torch.bfloat16)
    optimizer = torch.optim.AdamW(block.parameters(), lr=1e-3)
    scaler = torch.cuda.amp.GradScaler(enabled=True)
    for step in range(10):
        x = torch.randn(8, 64, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = block(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
