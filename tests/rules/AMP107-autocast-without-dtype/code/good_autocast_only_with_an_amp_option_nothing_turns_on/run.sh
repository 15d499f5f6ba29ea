#!/bin/bash
python train.py --steps 1000
