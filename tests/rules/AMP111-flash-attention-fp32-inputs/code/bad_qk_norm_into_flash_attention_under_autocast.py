# SimpleTuner 18590a0 (Flux2 QK-norm): RMSNorm is on autocast's fp32 list, so under bf16 autocast the normed q/k
# are fp32 while v stays bf16, and flash-attn refuses the mix ("FlashAttention only support fp16 and bf16").
import torch
from flash_attn import flash_attn_func
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.norm_q = nn.RMSNorm(dim // heads)
        self.norm_k = nn.RMSNorm(dim // heads)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = self.norm_q(q.unflatten(-1, (self.heads, -1)))
        k = self.norm_k(k.unflatten(-1, (self.heads, -1)))
        v = v.unflatten(-1, (self.heads, -1))
        return flash_attn_func(q, k, v, causal=True).flatten(-2)  # ampdoctor: expect[AMP111]


def train_step(model, batch, optimizer):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(batch).float().pow(2).mean()
    loss.backward()
    optimizer.step()
