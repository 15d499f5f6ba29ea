from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import DPOConfig

from trainer import PairTrainer

model = AutoModelForCausalLM.from_pretrained("base-model")
tokenizer = AutoTokenizer.from_pretrained("base-model")
args = DPOConfig(output_dir="out", per_device_train_batch_size=2)
trainer = PairTrainer(model, args=args, train_dataset=load_dataset("pairs")["train"], tokenizer=tokenizer)
trainer.train()
