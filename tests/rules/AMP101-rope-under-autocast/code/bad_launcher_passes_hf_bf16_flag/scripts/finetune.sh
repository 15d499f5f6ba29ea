#!/bin/bash
set -e
OUT=checkpoints/tiny
torchrun --nproc_per_node 8 \
    train.py \
    --output_dir "$OUT" \
    --bf16 True \
    --learning_rate 2e-5
