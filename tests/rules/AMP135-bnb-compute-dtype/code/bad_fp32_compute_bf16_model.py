# bitsandbytes #650: QLoRA with the model in bf16 but the 4-bit layers told to compute in fp32; every quantized
# matmul upcasts its input and runs the slow fp32 path.
import torch
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

bnb = BitsAndBytesConfig(
    load_in_4bit=True,
    bnb_4bit_quant_type="nf4",
    bnb_4bit_compute_dtype=torch.float32,  # ampdoctor: expect[AMP135]
)
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", quantization_config=bnb, torch_dtype=torch.bfloat16)
