# The fix: the experts cast both operands to autocast's dtype themselves, as autocast would for a matmul it knows;
# the fp32 weights stay the master copy.
# ampdoctor: policy=bf16-mixed
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


class Experts(nn.Module):
    def __init__(self, experts: int = 4, dim: int = 64, hidden: int = 512):
        super().__init__()
        self.up = nn.Parameter(torch.randn(experts, dim, hidden) * 0.02)
        self.down = nn.Parameter(torch.randn(experts, hidden, dim) * 0.02)

    def forward(self, x, offs):
        dt = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else self.up.dtype
        h = F.grouped_mm(x.to(dt), self.up.to(dt), offs=offs)
        return F.grouped_mm(F.silu(h), self.down.to(dt), offs=offs)


router = nn.Linear(64, 64)
experts = Experts()
optimizer = torch.optim.AdamW([*router.parameters(), *experts.parameters()], lr=1e-3)
x = torch.randn(64, 64)
offs = torch.tensor([16, 32, 48, 64], dtype=torch.int32)
with torch.autocast("cpu", dtype=torch.bfloat16):
    y = experts(router(x), offs)
loss = y.float().pow(2).mean()
loss.backward()
optimizer.step()
