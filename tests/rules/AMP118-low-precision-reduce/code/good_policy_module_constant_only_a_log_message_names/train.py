import logging

from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

from policies.mixed_precision import fp32_policy

logger = logging.getLogger(__name__)


def wrap(model):
    logger.info("fp32 training: not using the bf16_policy policy")
    return FSDP(model, mixed_precision=fp32_policy)
