# The fp32 upcast happens before `fully_shard`, which then shards fp32 parameters and casts them to bf16 for
# compute through its policy.
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def shard(model: torch.nn.Module) -> torch.nn.Module:
    for _, param in model.named_parameters():
        if param.requires_grad:
            param.data = param.data.to(torch.float32)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    fully_shard(model, mp_policy=policy)
    return model


def unsharded(model: torch.nn.Module, use_fsdp: bool) -> torch.nn.Module:
    if use_fsdp:
        fully_shard(model)
    else:
        for p in model.parameters():
            p.data = p.data.to(torch.float32)
    return model
