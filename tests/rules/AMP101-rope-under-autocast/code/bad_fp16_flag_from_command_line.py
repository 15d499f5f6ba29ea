# A script whose `--half` flag (store_true, into `args.fp16`) is handed to the HF Trainer's arguments: the runs with the flag train
# under fp16 autocast, and the angles are a matmul that autocast computes in fp16 there.
import argparse

import torch
from transformers import TrainingArguments


def rope(position_ids, inv_freq):
    angles = position_ids[:, :, None].float() @ inv_freq[None, None, :].float()  # ampdoctor: expect[AMP101]
    return torch.cos(angles), torch.sin(angles)


parser = argparse.ArgumentParser()
parser.add_argument("--half", dest="fp16", action="store_true")
args = parser.parse_args()
training_args = TrainingArguments(output_dir="out", fp16=args.fp16)
