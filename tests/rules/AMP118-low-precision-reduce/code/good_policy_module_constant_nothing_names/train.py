from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

from policies.mixed_precision import fp32_policy


def wrap(model, bf16=False):
    return FSDP(model, mixed_precision=fp32_policy)
