# A Lightning fine-tuning example whose options are a dataclass filled from the command line. The FSDP strategy,
# whose policy reduces gradients in bf16, is built only for `--strategy fsdp`; the default is "auto" and the one
# launcher of the project does not pass it: a note on code the project carries, not a warning on its runs.
import argparse
from dataclasses import dataclass

import lightning.pytorch as pl
import torch
from lightning.pytorch.strategies import DeepSpeedStrategy, FSDPStrategy
from torch.distributed.fsdp import MixedPrecision


@dataclass
class Args:
    model: str = "small"
    batch_size: int = 4
    strategy: str = "auto"


def parse_args() -> Args:
    parser = argparse.ArgumentParser()
    for k, v in Args.__dataclass_fields__.items():
        parser.add_argument(f"--{k}", type=v.type, default=v.default)
    return Args(**vars(parser.parse_args()))


def main(model):
    args = parse_args()
    if args.strategy == "fsdp":
        strategy = FSDPStrategy(
            mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16),  # ampdoctor: expect[AMP118:info]
        )
        precision = None
    elif args.strategy == "deepspeed":
        strategy = DeepSpeedStrategy(stage=3)
        precision = "bf16-mixed"
    else:
        strategy = "auto"
        precision = "bf16-true"
    trainer = pl.Trainer(strategy=strategy, precision=precision, max_steps=10)
    trainer.fit(model)
