# pytorch#106395's setting spelled with FSDP2: `reduce_dtype=None` is the default written out, so gradients are
# reduce-scattered in the param dtype (bf16).
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def shard(model):
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=None)  # ampdoctor: expect[AMP118]
    for block in model.layers:
        fully_shard(block, mp_policy=mp)
    return fully_shard(model, mp_policy=mp)
