# Options are kept flat under dotted names (`getattr(opts, "fsdp.grad_reduce_dtype")`), filled from the nested YAML
# blocks of the run's config; the config of the project's large runs writes bfloat16: those runs reduce in bf16.
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
    policy = MixedPrecision(param_dtype=DTYPES[param_dtype], reduce_dtype=DTYPES[reduce_dtype])  # ampdoctor: expect[AMP118]
    return FSDP(model, mixed_precision=policy)
