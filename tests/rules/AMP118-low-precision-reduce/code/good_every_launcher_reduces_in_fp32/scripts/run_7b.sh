#!/bin/bash
torchrun --nproc_per_node 8 ../train.py \
    --precision bf16 \
    --grad_precision=fp32
