# Options are kept flat under dotted names (`getattr(opts, "fsdp.grad_reduce_dtype")`), filled from the nested YAML
# blocks of the run's config; the command-line default is bf16, but every config the project ships writes float32
# (through an anchor): a half reduce only where a user asks for it.
import argparse

import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision

DTYPES = {"float16": torch.float16, "float32": torch.float32, "bfloat16": torch.bfloat16}


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    group = parser.add_argument_group("fsdp")
    group.add_argument("--fsdp.param-dtype", type=str, default="bfloat16", choices=list(DTYPES))
    group.add_argument("--fsdp.grad-reduce-dtype", type=str, default="bfloat16", choices=list(DTYPES))
    return parser


def wrap(model: torch.nn.Module, opts) -> FSDP:
    param_dtype = getattr(opts, "fsdp.param_dtype")
    reduce_dtype = getattr(opts, "fsdp.grad_reduce_dtype")
    policy = MixedPrecision(param_dtype=DTYPES[param_dtype], reduce_dtype=DTYPES[reduce_dtype])
    return FSDP(model, mixed_precision=policy)
