#!/bin/bash
# The pure-bf16 mode is one the project runs.
torchrun --nproc_per_node 8 train.py --pure-bf16
