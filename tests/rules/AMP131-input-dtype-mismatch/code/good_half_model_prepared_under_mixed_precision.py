# A frozen perceptual network cast to the run's weight dtype and handed to accelerate: a run in half precision is
# one with mixed precision on, whose prepared forward runs under autocast, so the fp32 images it gets are cast there;
# a run without mixed precision keeps the network fp32.
import argparse

import torch
from accelerate import Accelerator
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", default="no", choices=["no", "fp16", "bf16"])
args = parser.parse_args()
accelerator = Accelerator(mixed_precision=args.mixed_precision)
net = accelerator.prepare(nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU()))
weight_dtype = torch.float32
if accelerator.mixed_precision == "bf16":
    weight_dtype = torch.bfloat16
net.to(dtype=weight_dtype)
pred = torch.rand(2, 3, 32, 32, device=accelerator.device)
score = net(pred.float()).mean()
