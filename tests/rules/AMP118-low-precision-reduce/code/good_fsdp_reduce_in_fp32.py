# The fix of pytorch/pytorch#106395 (and torchtitan PR #1028's kept default): bf16 compute, fp32 gradient reduce.
import torch
from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy, fully_shard

fsdp1_policy = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, buffer_dtype=torch.bfloat16)
full_precision = MixedPrecision(param_dtype=torch.float32)


def shard(model):
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.layers:
        fully_shard(block, mp_policy=mp_policy)
    return fully_shard(model, mp_policy=mp_policy)
