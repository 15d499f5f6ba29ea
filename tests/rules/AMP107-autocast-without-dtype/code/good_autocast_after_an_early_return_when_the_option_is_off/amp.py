# The helper returns before its dtype-less autocast unless `use_autocast`, which defaults to False, and the trainer
# calls it without: the autocast never runs here (a note, not a warning).
from contextlib import nullcontext

import torch


def amp_context(device="cuda", use_autocast=False):
    if not use_autocast:
        return nullcontext()
    return torch.autocast(device)
