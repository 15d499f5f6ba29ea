#!/bin/bash
PRECISION=bf16
torchrun --nproc_per_node 8 train.py --precision $PRECISION --grad_precision fp32
