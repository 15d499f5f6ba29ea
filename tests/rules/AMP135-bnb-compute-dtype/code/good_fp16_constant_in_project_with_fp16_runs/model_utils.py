# The project trains in fp16 as well as bf16: a constant fp16 compute dtype is right for some of its runs, so it is
# not judged against the bf16 ones.
import torch
from transformers import BitsAndBytesConfig


def quantization_config(args):
    if args.load_in_4bit:
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_compute_dtype=torch.float16,
            bnb_4bit_quant_type=args.quant_type,
        )
    return None
