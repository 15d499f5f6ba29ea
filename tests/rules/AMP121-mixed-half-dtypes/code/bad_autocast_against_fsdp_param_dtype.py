# FSDP computes with bf16 weights while the step's autocast asks for fp16.
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision


def wrap(model):
    policy = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return FSDP(model, mixed_precision=policy)


def step(model, batch, optimizer):
    with torch.autocast("cuda", dtype=torch.float16):  # ampdoctor: expect[AMP121:warning]
        loss = model(batch).mean()
    loss.backward()
    optimizer.step()
