#!/bin/bash
python train.py --steps 1000 --use_amp=True
