# The bf16-reduce arm keeps fp32 params: it is no pure-bf16 mode, only a mixed policy that reduces in bf16 beside
# one that reduces in float32; the bf16 reduce is a slip of the mixed policy, and stays a warning.
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision


def wrap(model, args):
    if args.full_precision_reduce:
        policy = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, buffer_dtype=torch.bfloat16)
    else:
        policy = MixedPrecision(param_dtype=torch.float32, reduce_dtype=torch.bfloat16, buffer_dtype=torch.bfloat16)  # ampdoctor: expect[AMP118:warning]
    return FSDP(model, mixed_precision=policy)


def train(model, loader, optimizer, args):
    model = wrap(model, args)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
