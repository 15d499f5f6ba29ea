#!/bin/bash
python train.py --lr 3e-4
python train.py --lr 1e-4
