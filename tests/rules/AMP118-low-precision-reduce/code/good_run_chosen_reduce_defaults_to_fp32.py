# The reduce dtype is an option whose default is fp32 and nothing launches the script with another: gradients are
# reduced in fp32 unless a user asks for bf16 on the command line.
import argparse

import torch
from torch.distributed.fsdp import MixedPrecision

parser = argparse.ArgumentParser()
parser.add_argument("--reduce-dtype", dest="reduce_dtype", choices=["fp32", "bf16"], default="fp32")
parser.add_argument("--pure-bf16", action="store_true")
args = parser.parse_args()

policy = MixedPrecision(
    param_dtype=torch.bfloat16,
    reduce_dtype=torch.bfloat16 if args.pure_bf16 else {"fp32": torch.float32, "bf16": torch.bfloat16}[args.reduce_dtype],
)
