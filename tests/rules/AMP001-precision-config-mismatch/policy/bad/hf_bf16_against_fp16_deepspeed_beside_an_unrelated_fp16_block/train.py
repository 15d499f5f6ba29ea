import sys

import yaml
from transformers import Trainer, TrainingArguments


def main(model):
    cfg = yaml.safe_load(open(sys.argv[1]))
    Trainer(model=model, args=TrainingArguments(**cfg)).train()
