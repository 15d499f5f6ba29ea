# A flag that can only turn fp16 off (store_false with a default of False): no run of this script trains under
# autocast, and the angles' matmul stays fp32.
import argparse

import torch
from transformers import TrainingArguments


def rope(position_ids, inv_freq):
    angles = position_ids[:, :, None].float() @ inv_freq[None, None, :].float()
    return torch.cos(angles), torch.sin(angles)


parser = argparse.ArgumentParser()
parser.add_argument("--no_fp16", dest="fp16", action="store_false", default=False)
args = parser.parse_args()
training_args = TrainingArguments(output_dir="out", fp16=args.fp16)
