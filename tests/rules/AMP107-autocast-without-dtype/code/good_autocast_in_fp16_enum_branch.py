# Autocast without a dtype inside the branch of an enum precision that only fp16 runs take: float16 is what that
# branch is for, though the file also has a bf16 branch.
import contextlib
import enum

import torch


class Precision(str, enum.Enum):
    FP32 = "fp32"
    AMP_FP16 = "amp_fp16"
    AMP_BF16 = "amp_bf16"


@contextlib.contextmanager
def precision_context(precision: Precision):
    if precision == Precision.AMP_FP16:
        with torch.autocast("cuda", enabled=True):
            yield
    elif precision == Precision.AMP_BF16:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            yield
    else:
        yield
