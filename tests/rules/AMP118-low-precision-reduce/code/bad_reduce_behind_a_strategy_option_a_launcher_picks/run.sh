#!/bin/bash
python train.py --model small --batch_size 8
python train.py --model large --strategy fsdp
