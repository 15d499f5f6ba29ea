# Two FSDP modes offered as alternatives: a mixed one that reduces gradients in float32, and a pure-bf16 one (params,
# reduce and buffers all bf16). A run reduces in bf16 only where it picks the pure mode over the mixed one: a note.
import argparse

import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision


def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mixed-bf16", action="store_true")
    parser.add_argument("--pure-bf16", action="store_true")
    return parser.parse_args()


def wrap(model, args):
    policy = None
    if args.mixed_bf16:
        policy = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, buffer_dtype=torch.bfloat16)
    elif args.pure_bf16:
        policy = MixedPrecision(
            param_dtype=torch.bfloat16,
            reduce_dtype=torch.bfloat16,  # ampdoctor: expect[AMP118:info]
            buffer_dtype=torch.bfloat16,
        )
    return FSDP(model, mixed_precision=policy)


def main(model, loader, optimizer):
    model = wrap(model, parse())
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main(None, [], None)
