# The reduce-scatter of AMP205's summary (FSDP's gradient reduction): the policy keeps fp32 gradients
# (bf16-mixed), but the flat gradient is reduce-scattered in bf16. One gloo rank, in process, so the collective runs.
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
    flat = torch.cat([p.grad.flatten() for p in model.parameters()]).to(torch.bfloat16)
    shard = torch.empty(flat.numel() // dist.get_world_size(), dtype=flat.dtype)
    dist.reduce_scatter_single(shard, flat)  # ampdoctor: expect[AMP205]
    optimizer.step()
finally:
    dist.destroy_process_group()
