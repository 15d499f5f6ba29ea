# The fix of transformers PR #29285: the angles are computed with autocast off, in fp32 (cos/sin stay fp32 here).
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim=16, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        with torch.autocast("cpu", enabled=False):
            freqs = (inv @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return x * emb.cos() + x.roll(1, -1) * emb.sin()


proj, rotary = nn.Linear(16, 16), Rotary()
optimizer = torch.optim.AdamW(proj.parameters(), lr=1e-3)
x, position_ids = torch.randn(2, 8, 16), torch.arange(1000, 1008)[None].expand(2, -1)
with torch.autocast("cpu", dtype=torch.bfloat16):
    loss = rotary(proj(x), position_ids).float().pow(2).mean()
loss.backward()
optimizer.step()
