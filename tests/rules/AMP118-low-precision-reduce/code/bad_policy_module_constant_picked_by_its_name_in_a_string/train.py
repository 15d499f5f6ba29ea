from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

from policies import mixed_precision


def wrap(model, bf16=False):
    return FSDP(model, mixed_precision=getattr(mixed_precision, "bf16_policy" if bf16 else "fp32_policy"))
