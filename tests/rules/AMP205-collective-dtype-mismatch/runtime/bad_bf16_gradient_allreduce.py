# pytorch/pytorch#106395: gradients reduced in bf16 were unstable at 48x8 GPUs. Here the policy keeps fp32 master
# gradients (bf16-mixed), but a hand-written hook compresses them to bf16 for the all-reduce. One gloo rank, in
# process, so the collective really runs.
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
        compressed = p.grad.to(torch.bfloat16)
        dist.all_reduce(compressed)  # ampdoctor: expect[AMP205]
        p.grad.copy_(compressed / dist.get_world_size())
    optimizer.step()
finally:
    dist.destroy_process_group()
