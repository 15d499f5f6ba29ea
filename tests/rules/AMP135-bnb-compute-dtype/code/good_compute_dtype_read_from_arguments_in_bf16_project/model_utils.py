# The 4-bit branch passes the compute dtype the arguments hold (the run's dtype); the fp16 written to it in the
# export branch is that branch's only, so the 4-bit layers are not judged against the project's bf16 runs.
import torch
from transformers import BitsAndBytesConfig


def quantization_config(args):
    if args.export_gptq:
        args.compute_dtype = torch.float16  # the GPTQ exporter wants fp16
        return None
    if args.load_in_4bit:
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_compute_dtype=args.compute_dtype,
            bnb_4bit_quant_type=args.quant_type,
        )
    return None
