# A solver's FSDP setup method takes the gradient precision as a parameter; its one caller hands it the option
# `--grad_precision`, which defaults to fp32 and wins over `--precision` (`grad_precision or precision`): a run with
# the script's defaults reduces in fp32, and a half reduce is only what a user may ask for.
import argparse

import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision

DTYPES = {"fp32": torch.float, "tf32": torch.float, "bf16": torch.bfloat16, "fp16": torch.float16}


class Solver:
    def __init__(self, args):
        self.args = args

    @staticmethod
    def get_args_parser():
        parser = argparse.ArgumentParser()
        parser.add_argument("--precision", type=str, choices=["fp16", "bf16", "tf32"], default="bf16")
        parser.add_argument("--grad_precision", choices=["fp32", "fp16", "bf16"], default="fp32")
        return parser

    def build(self, model):
        return self.setup_fsdp(model, self.args.precision, self.args.grad_precision)

    def setup_fsdp(self, model, precision, grad_precision):
        return FSDP(
            model,
            mixed_precision=MixedPrecision(
                param_dtype=DTYPES[precision],
                reduce_dtype=DTYPES[grad_precision or precision],
            ),
        )


if __name__ == "__main__":
    Solver(Solver.get_args_parser().parse_args()).build(torch.nn.Linear(4, 4))
