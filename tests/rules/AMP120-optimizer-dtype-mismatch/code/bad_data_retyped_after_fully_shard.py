# FSDP2: trainable parameters upcast to fp32 masters through `.data`, but only after `fully_shard` has turned them
# into DTensor shards; the optimizer step then fails on the replaced storage.
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def shard(model: torch.nn.Module) -> torch.nn.Module:
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.children():
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    for _, param in model.named_parameters():
        if param.requires_grad:
            param.data = param.data.to(torch.float32)  # ampdoctor: expect[AMP120:warning]
    return model
