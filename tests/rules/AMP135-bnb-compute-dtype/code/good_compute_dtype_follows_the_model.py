# The fix: one dtype for the model and its 4-bit layers (TRL passes the model's dtype as the compute dtype).
import torch
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, TrainingArguments

dtype = torch.bfloat16
bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=dtype)
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", quantization_config=bnb, torch_dtype=dtype)

# fp32 compute for an fp32 model is consistent, just slow by choice
fp32_model = AutoModelForCausalLM.from_pretrained(
    "meta-llama/Llama-2-7b-hf",
    quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float32),
    torch_dtype=torch.float32,
)
args = TrainingArguments(output_dir="out", bf16=True)


def fp16_case():
    bnb_config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float16)
    return AutoModelForCausalLM.from_pretrained("facebook/opt-125m", quantization_config=bnb_config, torch_dtype=torch.float16)


def bf16_case():
    # the same name in another function is another config
    bnb_config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)
    return AutoModelForCausalLM.from_pretrained("facebook/opt-125m", quantization_config=bnb_config, torch_dtype=torch.bfloat16)
