# A policy that is compared and then used to shard still reduces in bf16.
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def shard(model, previous):
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)  # ampdoctor: expect[AMP118]
    if policy != previous:
        fully_shard(model, mp_policy=policy)
    return model
