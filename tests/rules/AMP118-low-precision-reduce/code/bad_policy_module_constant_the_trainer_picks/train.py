from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

from policies.mixed_precision import bf16_policy, fp32_policy


def wrap(model, bf16=False):
    return FSDP(model, mixed_precision=bf16_policy if bf16 else fp32_policy)
