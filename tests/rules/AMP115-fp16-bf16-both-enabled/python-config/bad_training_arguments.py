# Both half modes switched on in code, as a YAML file of the same arguments would: TrainingArguments refuses it.
from transformers import TrainingArguments

args = TrainingArguments(
    output_dir="out",
    fp16=True,
    bf16=True,  # ampdoctor: expect[AMP115]
)
