# bad_bf16_gradient_reduce_scatter.py with the flat gradient reduce-scattered in fp32, the policy's reduce dtype
# (bf16-mixed keeps fp32 gradients). One gloo rank, in process, so the collective runs.
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
    flat = torch.cat([p.grad.flatten() for p in model.parameters()])
    shard = torch.empty(flat.numel() // dist.get_world_size(), dtype=flat.dtype)
    dist.reduce_scatter_single(shard, flat)
    optimizer.step()
finally:
    dist.destroy_process_group()
