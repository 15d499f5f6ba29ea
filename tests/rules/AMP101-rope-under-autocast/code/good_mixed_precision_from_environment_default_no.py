# The environment's precision defaults to "no": without a run that sets MIXED_PRECISION there is no autocast here,
# and the angles' matmul stays fp32.
import os

import torch
from accelerate import Accelerator


def rope(position_ids, inv_freq):
    angles = position_ids[:, :, None].float() @ inv_freq[None, None, :].float()
    return torch.cos(angles), torch.sin(angles)


accelerator = Accelerator(mixed_precision=os.environ.get("MIXED_PRECISION", "no"))
