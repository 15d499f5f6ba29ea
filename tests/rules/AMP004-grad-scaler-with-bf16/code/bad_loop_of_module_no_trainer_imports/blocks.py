# The same loop in a module that no training file of the project imports: its `__main__` block is how it is run,
# so the scaler that meets bf16 gradients there is part of a training run.
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
    scaler = torch.cuda.amp.GradScaler(enabled=True)  # ampdoctor: expect[AMP004]
    for step in range(10):
        x = torch.randn(8, 64, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = block(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
