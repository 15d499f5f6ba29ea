from dataclasses import dataclass, field

import deepspeed
from transformers import HfArgumentParser, Trainer, TrainingArguments


@dataclass
class Arguments(TrainingArguments):
    deepspeed: str = field(default="ds_config.json")


def reference(model, config):
    engine, *_ = deepspeed.initialize(model=model, config=config)
    return engine


def main(model, data):
    (args,) = HfArgumentParser(Arguments).parse_yaml_file("train.yaml")
    Trainer(model=model, args=args, train_dataset=data).train()
