#!/bin/bash
accelerate launch sample.py --mixed_precision="fp16" --steps 50
accelerate launch sample.py --mixed_precision bf16 --steps 20
