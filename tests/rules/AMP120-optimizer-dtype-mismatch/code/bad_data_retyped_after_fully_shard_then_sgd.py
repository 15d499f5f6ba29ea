# The same widening after `fully_shard` with plain SGD: its step takes the mixed pair, so nothing fails at once,
# but the sharded forward still runs the dtype the shards were made in.
import torch
from torch.distributed.fsdp import fully_shard


def build(net: torch.nn.Module):
    net.to(torch.bfloat16)
    fully_shard(net)
    for p in net.parameters():
        p.data = p.data.to(torch.float32)  # ampdoctor: expect[AMP120:warning]
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    return net, opt
