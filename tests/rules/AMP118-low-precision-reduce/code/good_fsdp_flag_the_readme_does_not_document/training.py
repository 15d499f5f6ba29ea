# A fine-tuning script whose FSDP strategy, reducing in bf16, is built only with `--use_fsdp`; its README runs it
# with `--use_compile` and never names `--use_fsdp`: a note on an option the project offers, not a warning.
import argparse
import functools

import lightning.pytorch as pl
import torch
from lightning.pytorch.strategies import FSDPStrategy
from torch.distributed.fsdp import MixedPrecision
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy


def main(model, block):
    parser = argparse.ArgumentParser()
    parser.add_argument("--train_epochs", type=int, default=3)
    parser.add_argument("--use_compile", action="store_true")
    parser.add_argument("--use_fsdp", action="store_true")
    args = parser.parse_args()
    strategy = "auto"
    if args.use_fsdp:
        strategy = FSDPStrategy(
            auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={block}),
            mixed_precision=MixedPrecision(
                param_dtype=torch.bfloat16,
                reduce_dtype=torch.bfloat16,  # ampdoctor: expect[AMP118:info]
            ),
        )
    trainer = pl.Trainer(precision="bf16-mixed", strategy=strategy, max_epochs=args.train_epochs)
    trainer.fit(model)
