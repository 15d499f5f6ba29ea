# pytorch/pytorch#106395: FSDP `MixedPrecision(reduce_dtype=torch.bfloat16)` was unstable on 48x8 GPUs and was
# fixed by reducing in fp32. FSDP2's MixedPrecisionPolicy without reduce_dtype reduces in param_dtype.
import torch
from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy, fully_shard

fsdp1_policy = MixedPrecision(
    param_dtype=torch.bfloat16,
    reduce_dtype=torch.bfloat16,  # ampdoctor: expect[AMP118]
    buffer_dtype=torch.bfloat16,
)


def shard(model):
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16)  # ampdoctor: expect[AMP118]
    for block in model.layers:
        fully_shard(block, mp_policy=mp_policy)
    return fully_shard(model, mp_policy=mp_policy)
