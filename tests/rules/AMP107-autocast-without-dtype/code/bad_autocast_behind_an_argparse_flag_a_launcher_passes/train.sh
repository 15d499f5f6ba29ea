#!/bin/bash
deepspeed run.py --epochs 20 --amp --deepspeed_config ds_config.json
