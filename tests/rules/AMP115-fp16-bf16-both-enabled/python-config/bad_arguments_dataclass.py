# A TrainingArguments subclass whose field defaults switch both half modes on.
from dataclasses import dataclass

from transformers import TrainingArguments


@dataclass
class FinetuneArguments(TrainingArguments):
    lora_rank: int = 8
    fp16: bool = True
    bf16: bool = True  # ampdoctor: expect[AMP115]
