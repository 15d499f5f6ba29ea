# One mode in each branch: whichever runs, only one half mode is on.
from transformers import TrainingArguments


def arguments(use_bf16: bool) -> TrainingArguments:
    if use_bf16:
        return TrainingArguments(output_dir="out", bf16=True)
    return TrainingArguments(output_dir="out", fp16=True)
