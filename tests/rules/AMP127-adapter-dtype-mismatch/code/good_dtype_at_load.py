# The fix the catalog gives for huggingface/peft#2421: load the base in bf16 with `torch_dtype`, then add the
# adapters (PEFT keeps them fp32 on purpose, PR #1706); moving the model to a device casts nothing.
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

base = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", torch_dtype=torch.bfloat16)
model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"]))
model.to("cuda")
model.print_trainable_parameters()
