# A standalone script quantizes a checkpoint and loads it right here with no torch_dtype: transformers' 4-bit loader
# then keeps the unquantized parts in fp16, which the constant fp16 compute dtype matches. The project's bf16 training
# config (recipes/) describes other runs, not this load.
import torch
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

config = BitsAndBytesConfig(
    load_in_4bit=True,
    bnb_4bit_compute_dtype=torch.float16,
    bnb_4bit_quant_type="nf4",
)
model = AutoModelForCausalLM.from_pretrained("some/checkpoint", quantization_config=config, device_map="cuda")
model.save_pretrained("quantized")
