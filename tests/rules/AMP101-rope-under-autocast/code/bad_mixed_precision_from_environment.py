# The precision comes from the environment with bf16 as its default (`MIXED_PRECISION`, as launch scripts export
# it): unless a run says otherwise, accelerate trains under bf16 autocast and the angles' matmul runs in bf16.
import os

import torch
from accelerate import Accelerator


def rope(position_ids, inv_freq):
    angles = position_ids[:, :, None].float() @ inv_freq[None, None, :].float()  # ampdoctor: expect[AMP101]
    return torch.cos(angles), torch.sin(angles)


accelerator = Accelerator(mixed_precision=os.environ.get("MIXED_PRECISION", "bf16"))
