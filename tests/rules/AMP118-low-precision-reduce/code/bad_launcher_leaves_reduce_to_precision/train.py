# The reduce dtype follows `--grad_precision`, else `--precision`. Run with its defaults the script reduces in
# fp32, but the run its launcher starts passes `--precision bf16` and no `--grad_precision`: every gradient is
# reduce-scattered in bf16.
import argparse

import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def wrap(model, args):
    return FSDP(model, mixed_precision=MixedPrecision(
        param_dtype=DTYPES[args.precision],
        reduce_dtype=DTYPES[args.grad_precision or args.precision],  # ampdoctor: expect[AMP118]
    ))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    parser.add_argument("--grad_precision", choices=["fp32", "bf16", "fp16"])
    args = parser.parse_args()
    wrap(torch.nn.Linear(8, 8), args)


if __name__ == "__main__":
    main()
