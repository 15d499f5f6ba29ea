# Linear attention computed in a dtype the module picks, fp16 only where a caller turns bf16 off, in a file whose
# other code enters fp16 autocast (a matmul benchmark that calls no module): fp16 is possible for the context, not
# known, so its overflow is a note, not a warning.
import torch
import torch.nn.functional as F
from torch import nn

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class SparseLinearAttention(nn.Module):
    def __init__(self, head_dim: int, use_bf16: bool = True):
        super().__init__()
        self.dtype = DTYPES["bf16" if use_bf16 else "fp16"]
        self.proj = nn.Linear(head_dim, head_dim)

    def forward(self, q, k, v):
        q, k, v = F.relu(q).to(self.dtype), F.relu(k).to(self.dtype), v.to(self.dtype)
        kvsum = k.transpose(-1, -2) @ v  # ampdoctor: expect[AMP212:info]
        ksum = k.sum(dim=-2, keepdim=True)
        out = (q @ kvsum) / (1e-5 + (q * ksum).sum(dim=-1, keepdim=True))
        with torch.amp.autocast("cuda", dtype=self.dtype):
            return self.proj(out)


def build(cfg):
    return SparseLinearAttention(cfg.head_dim, use_bf16=cfg.use_bf16)


def matmul_speed(a, b):
    with torch.autocast("cuda"):
        return torch.mm(a, b)
