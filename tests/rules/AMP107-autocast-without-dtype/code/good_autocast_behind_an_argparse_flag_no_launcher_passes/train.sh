#!/bin/bash
deepspeed run.py --epochs 20 --deepspeed_config ds_config.json
