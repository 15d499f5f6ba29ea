# The text encoder gets adapters only when it is trained, and is cast to the half weight dtype only when it is not:
# the two never meet in one run, so no trainable adapter is cast.
import torch
from peft import LoraConfig, get_peft_model


def setup(args, accelerator, text_encoder, vae):
    weight_dtype = torch.float16 if accelerator.mixed_precision == "fp16" else torch.float32
    if not args.train_text_encoder:
        text_encoder.requires_grad_(False)
    elif args.use_lora:
        text_encoder = get_peft_model(text_encoder, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
    vae.to(accelerator.device, dtype=weight_dtype)
    if not args.train_text_encoder:
        text_encoder.to(accelerator.device, dtype=weight_dtype)
    return text_encoder, vae
