# TrainingArguments asks for fp16 while the DeepSpeed config written inline enables bf16.
from transformers import TrainingArguments

args = TrainingArguments(
    output_dir="out",
    fp16=True,  # ampdoctor: expect[AMP001]
    deepspeed={"bf16": {"enabled": True}, "zero_optimization": {"stage": 2}},
)
