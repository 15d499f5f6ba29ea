#!/bin/bash
accelerate launch train.py --mixed_precision=fp16 --teacher_dtype=bf16
