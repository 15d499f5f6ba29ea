# The same standalone load, but it asks for bf16 weights: each 4-bit layer casts the bf16 activations to fp16.
import torch
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

config = BitsAndBytesConfig(
    load_in_4bit=True,
    bnb_4bit_compute_dtype=torch.float16,  # ampdoctor: expect[AMP135]
    bnb_4bit_quant_type="nf4",
)
model = AutoModelForCausalLM.from_pretrained(
    "some/checkpoint", quantization_config=config, torch_dtype=torch.bfloat16, device_map="cuda"
)
model.save_pretrained("quantized")
