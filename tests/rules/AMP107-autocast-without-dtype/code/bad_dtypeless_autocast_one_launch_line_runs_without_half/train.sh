#!/bin/bash
accelerate launch train.py --mixed_precision=fp16
accelerate launch train.py --mixed_precision=no
