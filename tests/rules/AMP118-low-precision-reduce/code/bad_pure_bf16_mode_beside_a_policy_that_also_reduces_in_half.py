# Two FSDP modes, but the mixed one reduces in bf16 as well: no float32 reduce is offered, so the pure-bf16 mode's
# reduce is not a choice made over an fp32 one.
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision


def wrap(model, args):
    policy = None
    if args.mixed_bf16:
        policy = MixedPrecision(param_dtype=torch.float32, reduce_dtype=torch.bfloat16)  # ampdoctor: expect[AMP118]
    elif args.pure_bf16:
        policy = MixedPrecision(
            param_dtype=torch.bfloat16,
            reduce_dtype=torch.bfloat16,  # ampdoctor: expect[AMP118:warning]
            buffer_dtype=torch.bfloat16,
        )
    return FSDP(model, mixed_precision=policy)


def train(model, loader, optimizer, args):
    model = wrap(model, args)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
