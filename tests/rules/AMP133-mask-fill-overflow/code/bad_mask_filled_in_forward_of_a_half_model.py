# The same fill in the forward writes into the scores of the fp16 model and raises; in __init__, a tensor made fp16
# explicitly raises as well.
import torch
from torch import nn


class CausalAttention(nn.Module):
    def __init__(self, n=64, d=16):
        super().__init__()
        bias = torch.zeros(n, n, dtype=torch.float16)
        bias.masked_fill_(torch.ones(n, n).triu(1).bool(), -1e9)  # ampdoctor: expect[AMP133]
        self.register_buffer("bias", bias)
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        n = x.shape[1]
        scores = q @ k.transpose(-2, -1)
        scores = scores.masked_fill(torch.ones(n, n, device=x.device).triu(1).bool(), -1e9)  # ampdoctor: expect[AMP133]
        return scores.softmax(-1) @ v


model = CausalAttention().cuda().half()
