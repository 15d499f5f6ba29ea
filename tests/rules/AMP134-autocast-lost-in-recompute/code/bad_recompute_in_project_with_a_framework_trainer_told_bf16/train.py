from transformers import Trainer, TrainingArguments

from layers import Block

trainer = Trainer(model=Block(64), args=TrainingArguments(output_dir="out", bf16=True))
trainer.train()
