# The helper returns before its dtype-less autocast unless `use_autocast`, which defaults to False, but the trainer
# passes `use_autocast=True`: the autocast runs, in fp16 while the project trains bf16, a warning.
from contextlib import nullcontext

import torch


def amp_context(device="cuda", use_autocast=False):
    if not use_autocast:
        return nullcontext()
    return torch.autocast(device)  # ampdoctor: expect[AMP107:warning]
