# The fixes of pytorch/pytorch#137774 and huggingface/diffusers#9405: positions and timesteps stay int64/fp32 and are
# scaled before the downcast to the bf16 weight dtype.
import torch
from torch import nn


class TimestepMLP(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.proj = nn.Linear(1, dim)

    def forward(self, timesteps):
        t = timesteps.float() / 1000
        return self.proj(t.to(torch.bfloat16)[:, None])


class PositionBias(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.scale = nn.Linear(1, dim)

    def forward(self, seq_len):
        pos = torch.arange(seq_len, dtype=torch.float32) / seq_len
        return self.scale(pos.to(torch.bfloat16)[:, None])


time_mlp, bias = TimestepMLP().bfloat16(), PositionBias().bfloat16()
optimizer = torch.optim.AdamW([*time_mlp.parameters(), *bias.parameters()], lr=1e-3)
timesteps = torch.tensor([750, 999, 12])
loss = time_mlp(timesteps).float().pow(2).mean() + bias(1024).float().pow(2).mean()
loss.backward()
optimizer.step()
