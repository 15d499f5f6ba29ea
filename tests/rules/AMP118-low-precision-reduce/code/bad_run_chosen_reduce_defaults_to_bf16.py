# The reduce dtype follows an option that defaults to bf16: a run with the script's defaults reduces every gradient
# in bf16.
import argparse

import torch
from torch.distributed.fsdp import MixedPrecision

parser = argparse.ArgumentParser()
parser.add_argument("--reduce-dtype", dest="reduce_dtype", choices=["fp32", "bf16"], default="bf16")
args = parser.parse_args()

policy = MixedPrecision(
    param_dtype=torch.bfloat16,
    reduce_dtype={"fp32": torch.float32, "bf16": torch.bfloat16}[args.reduce_dtype],  # ampdoctor: expect[AMP118]
)
