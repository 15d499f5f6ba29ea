# The arguments collected in a dict literal and passed with **.
from transformers import TrainingArguments

USE_BF16 = True
options = {
    "output_dir": "out",
    "fp16": True,
    "bf16": USE_BF16,  # ampdoctor: expect[AMP115]
}
args = TrainingArguments(**options)
