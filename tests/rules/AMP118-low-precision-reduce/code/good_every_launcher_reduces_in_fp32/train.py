# The reduce dtype follows `--grad_precision`, else `--precision` (bf16 by default). Every run the project's
# launchers start passes `--grad_precision fp32`: gradients are reduced in fp32. A half reduce happens only where a
# user asks for one.
import argparse

import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def wrap(model, args):
    return FSDP(model, mixed_precision=MixedPrecision(
        param_dtype=DTYPES[args.precision],
        reduce_dtype=DTYPES[args.grad_precision or args.precision],
    ))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="bf16")
    parser.add_argument("--grad_precision", choices=["fp32", "bf16", "fp16"])
    args = parser.parse_args()
    wrap(torch.nn.Linear(8, 8), args)


if __name__ == "__main__":
    main()
