# A script named after consolidation that also trains: the name does not make it a conversion tool, and its
# backward passes reduce every gradient in bf16.
import torch
from torch.distributed.fsdp import MixedPrecision
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def consolidate_and_finetune(model, loader, optimizer):
    model = FSDP(model, mixed_precision=MixedPrecision(
        param_dtype=torch.bfloat16,
        reduce_dtype=torch.bfloat16,  # ampdoctor: expect[AMP118]
        buffer_dtype=torch.bfloat16,
    ))
    for batch in loader:
        model(batch).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
