# bitsandbytes #1515: an fp16 compute dtype copied from an fp16 recipe into a bf16 run: bf16 activations are cast
# to fp16 inside every 4-bit layer.
import torch
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, TrainingArguments

model = AutoModelForCausalLM.from_pretrained(
    "mistralai/Mistral-7B-v0.1",
    quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float16),  # ampdoctor: expect[AMP135]
)
args = TrainingArguments(output_dir="out", bf16=True, per_device_train_batch_size=4)
