import argparse

import deepspeed
import torch

from layers import Block


def _add_mixed_precision_args(parser):
    group = parser.add_argument_group(title="mixed precision")
    group.add_argument("--bf16", action="store_true")
    return parser


args = _add_mixed_precision_args(argparse.ArgumentParser()).parse_args()
model = Block(64, torch.bfloat16 if args.bf16 else torch.float32)
engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config="ds_config.json")
for _ in range(10):
    x = torch.randn(8, 64, device="cuda", requires_grad=True)
    loss = engine(x).float().pow(2).mean()
    engine.backward(loss)
    engine.step()
