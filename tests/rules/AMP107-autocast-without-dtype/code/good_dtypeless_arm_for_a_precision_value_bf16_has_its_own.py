# The precision string picks one arm: "amp" is fp16 AMP (autocast's CUDA default is what it wants), and bf16 runs
# ask for "amp_bf16", a value of their own, and get the arm that passes the dtype.
from contextlib import nullcontext

import torch


def autocast_for(precision: str, cache: bool = True):
    if precision == "amp":
        return torch.cuda.amp.autocast(cache_enabled=cache)
    elif precision == "amp_bf16" or precision == "amp_bfloat16":
        return lambda: torch.cuda.amp.autocast(dtype=torch.bfloat16, cache_enabled=cache)
    return nullcontext
