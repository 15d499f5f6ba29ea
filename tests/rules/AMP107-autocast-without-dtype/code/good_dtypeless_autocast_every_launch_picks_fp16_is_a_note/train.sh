#!/bin/bash
accelerate launch --main_process_port 29500 train.py \
    --mixed_precision=fp16
accelerate launch train.py --mixed_precision fp16
