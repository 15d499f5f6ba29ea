# Pure bf16 on purpose, with torchao's stochastic-rounding AdamW (pytorch/ao PR #1124's own fix): not a plain
# torch.optim optimizer, so small updates survive in expectation.
import torch
from torch import nn
from torchao.optim import _AdamW

model = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 8)).to(torch.bfloat16)
optimizer = _AdamW(model.parameters(), lr=3e-5, bf16_stochastic_round=True)


def train(loader):
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x).float(), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
