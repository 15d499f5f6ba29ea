# A helper builds the 4-bit config with a constant fp16 compute dtype; every run of the project is bf16 (its accelerate
# config), so each 4-bit layer casts bf16 activations to fp16.
import torch
from transformers import BitsAndBytesConfig


def quantization_config(args):
    if args.load_in_4bit:
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_compute_dtype=torch.float16,  # ampdoctor: expect[AMP135]
            bnb_4bit_quant_type=args.quant_type,
        )
    return None
