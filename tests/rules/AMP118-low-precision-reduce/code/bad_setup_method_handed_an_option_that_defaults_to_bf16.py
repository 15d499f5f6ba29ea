# The same solver with `--grad_precision` defaulting to bf16: a run with the script's defaults reduces its
# gradients in bf16.
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
        parser.add_argument("--grad_precision", choices=["fp32", "fp16", "bf16"], default="bf16")
        return parser

    def build(self, model):
        return self.setup_fsdp(model, self.args.precision, self.args.grad_precision)

    def setup_fsdp(self, model, precision, grad_precision):
        return FSDP(
            model,
            mixed_precision=MixedPrecision(
                param_dtype=DTYPES[precision],
                reduce_dtype=DTYPES[grad_precision or precision],  # ampdoctor: expect[AMP118]
            ),
        )


if __name__ == "__main__":
    Solver(Solver.get_args_parser().parse_args()).build(torch.nn.Linear(4, 4))
