# MoE experts as one grouped matmul (`F.grouped_mm`, torch's MoE kernel). Autocast has no rule for it, so it runs in
# the dtype of what it is given; casting the tokens to the experts' own fp32 weights (a common way to make the two
# agree) runs the experts, most of the step's matmul FLOPs, in fp32 in a bf16 run.
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
        h = F.grouped_mm(x.to(self.up.dtype), self.up, offs=offs)  # ampdoctor: expect[AMP203]
        return F.grouped_mm(F.silu(h), self.down, offs=offs)  # ampdoctor: expect[AMP203]


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
