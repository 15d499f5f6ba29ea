# A training script that hands accelerate the precision its command line chooses: `--mixed_precision` offers bf16
# (diffusers' and TRL's example scripts do this), so its runs include bf16 autocast ones, and the angles are a
# matmul that autocast computes in bf16 there.
import argparse

import torch
from accelerate import Accelerator


def rope(position_ids, inv_freq):
    angles = position_ids[:, :, None].float() @ inv_freq[None, None, :].float()  # ampdoctor: expect[AMP101]
    return torch.cos(angles), torch.sin(angles)


parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", type=str, default="no", choices=["no", "fp16", "bf16"])
args = parser.parse_args()
accelerator = Accelerator(mixed_precision=args.mixed_precision)
