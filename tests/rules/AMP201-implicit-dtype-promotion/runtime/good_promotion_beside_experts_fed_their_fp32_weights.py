# A residual stream that a bf16 block output promotes to fp32 (`h + attn(h)` with fp32 embeddings), feeding MoE
# experts that cast the tokens to their own fp32 weights before a grouped matmul (autocast has no rule for it). The
# experts run in fp32 because of their weights' dtype, whatever the activation's: a bf16 residual would be cast to
# fp32 all the same. That is AMP203's to report; the promotion is not why.
# ampdoctor: policy=bf16-mixed
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, dim: int = 64, experts: int = 4, hidden: int = 128):
        super().__init__()
        self.embed = nn.Embedding(100, dim)
        self.attn = nn.Linear(dim, dim)
        self.up = nn.Parameter(torch.randn(experts, dim, hidden) * 0.02)
        self.down = nn.Parameter(torch.randn(experts, hidden, dim) * 0.02)

    def forward(self, ids, offs):
        h = self.embed(ids)
        h = h + self.attn(h)  # bf16 output added to the fp32 stream: fp32
        up = F.grouped_mm(h.to(self.up.dtype), self.up, offs=offs)
        return F.grouped_mm(F.silu(up), self.down, offs=offs)


model = Block()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ids = torch.randint(0, 100, (64,))
offs = torch.tensor([16, 32, 48, 64], dtype=torch.int32)
with torch.autocast("cpu", dtype=torch.bfloat16):
    y = model(ids, offs)
loss = y.float().pow(2).mean()
loss.backward()
optimizer.step()
