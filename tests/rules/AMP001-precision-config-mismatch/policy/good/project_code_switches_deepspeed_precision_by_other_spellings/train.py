import json
import sys

import yaml
from transformers import Trainer, TrainingArguments


def main(model):
    cfg = yaml.safe_load(open(sys.argv[1]))
    with open(cfg["deepspeed"]) as f:
        ds_config = json.load(f)
    ds_config["fp16"] = dict(enabled=not cfg["bf16"], loss_scale=0)
    ds_config.setdefault("bf16", {})["enabled"] = cfg["bf16"]
    cfg["deepspeed"] = ds_config
    Trainer(model=model, args=TrainingArguments(**cfg)).train()
