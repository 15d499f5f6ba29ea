import json
from dataclasses import dataclass

import deepspeed
import yaml


@dataclass
class RunArgs:
    output_dir: str = "out"
    per_device_train_batch_size: int = 1
    learning_rate: float = 1e-5
    bf16: bool = False
    deepspeed: str = ""


def main(path, model):
    args = RunArgs(**yaml.safe_load(open(path)))
    config = json.load(open(args.deepspeed))
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    return engine
