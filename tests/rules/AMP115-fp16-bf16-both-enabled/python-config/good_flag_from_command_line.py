# bf16 comes from the command line: the code does not say both are on, so nothing is assumed.
import argparse

from transformers import TrainingArguments

cli = argparse.ArgumentParser()
cli.add_argument("--bf16", action="store_true")
flags = cli.parse_args()
args = TrainingArguments(output_dir="out", fp16=not flags.bf16, bf16=flags.bf16)
