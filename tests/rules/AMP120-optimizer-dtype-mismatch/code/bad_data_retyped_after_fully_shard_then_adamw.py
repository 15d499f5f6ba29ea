# bf16 weights sharded with FSDP2, then widened through `.data`: the sharded forward still gathers bf16, the
# gradients come back bf16 for parameters that now say fp32, and AdamW's step refuses the pair.
import torch
from torch.distributed.fsdp import fully_shard


def build(net: torch.nn.Module, lr: float):
    net.to(torch.bfloat16)
    for layer in net.layers:
        fully_shard(layer)
    fully_shard(net)
    for p in net.parameters():
        p.data = p.data.float()  # ampdoctor: expect[AMP120:error]
    return net, torch.optim.AdamW(net.parameters(), lr=lr, betas=(0.9, 0.95))
