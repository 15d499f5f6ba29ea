# The same script where the command line offers no half mode: accelerate runs without autocast, and the angles'
# matmul stays fp32.
import argparse

import torch
from accelerate import Accelerator


def rope(position_ids, inv_freq):
    angles = position_ids[:, :, None].float() @ inv_freq[None, None, :].float()
    return torch.cos(angles), torch.sin(angles)


parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", type=str, default="no", choices=["no", "fp8"])
args = parser.parse_args()
accelerator = Accelerator(mixed_precision=args.mixed_precision)
