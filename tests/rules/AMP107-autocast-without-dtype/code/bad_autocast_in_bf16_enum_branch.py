# The enum member names bf16, but the autocast of its branch has no dtype: on CUDA it runs in float16.
import contextlib
import enum

import torch


class Precision(str, enum.Enum):
    AMP_FP16 = "amp_fp16"
    AMP_BF16 = "amp_bf16"


@contextlib.contextmanager
def precision_context(precision: Precision):
    if precision == Precision.AMP_FP16:
        with torch.autocast("cuda", dtype=torch.float16):
            yield
    elif precision == Precision.AMP_BF16:
        with torch.autocast("cuda", enabled=True):  # ampdoctor: expect[AMP107]
            yield
