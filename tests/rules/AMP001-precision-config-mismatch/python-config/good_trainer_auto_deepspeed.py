# The DeepSpeed block left to "auto": the Trainer fills it from bf16=True.
from transformers import TrainingArguments

args = TrainingArguments(
    output_dir="out",
    bf16=True,
    deepspeed={"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}},
)
