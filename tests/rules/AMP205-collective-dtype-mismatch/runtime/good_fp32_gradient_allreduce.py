# The fix of pytorch/pytorch#106395: the fp32 gradients are all-reduced as they are, in the policy's reduce dtype.
# ampdoctor: policy=bf16-mixed
import torch
import torch.distributed as dist
from torch import nn

dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
try:
    model = nn.Linear(16, 16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.randn(4, 16))
    out.float().pow(2).mean().backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()
    optimizer.step()
finally:
    dist.destroy_process_group()
