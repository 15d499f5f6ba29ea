# The first arm tests a switch, not the precision: a bf16 run with AMP on takes it before the bf16 arm is ever
# tested, and autocasts in float16.
from contextlib import nullcontext

import torch


def autocast_for(precision: str, use_amp: bool):
    if use_amp:
        return torch.cuda.amp.autocast()  # ampdoctor: expect[AMP107]
    elif precision == "amp_bf16":
        return torch.cuda.amp.autocast(dtype=torch.bfloat16)
    return nullcontext()


def autocast_by_mode(mode: str):
    if mode in ("amp", "mixed"):
        return torch.cuda.amp.autocast()  # ampdoctor: expect[AMP107]
    elif precision_of(mode) == "bf16":
        return torch.cuda.amp.autocast(dtype=torch.bfloat16)
    return nullcontext()


def precision_of(mode: str) -> str:
    return {"bf16-mixed": "bf16"}.get(mode, mode)
