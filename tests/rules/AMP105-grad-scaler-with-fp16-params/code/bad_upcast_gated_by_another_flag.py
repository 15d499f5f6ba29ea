# The fp32 upcast of the trainable parameters sits under a flag that is not the precision (whether the text
# encoder is trained too): with that flag off, the unet's adapters, added after its fp16 cast, stay fp16.
import torch
from accelerate import Accelerator
from diffusers.training_utils import cast_training_params
from peft import LoraConfig


def main(args, unet, text_encoder):
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    weight_dtype = torch.float16 if accelerator.mixed_precision == "fp16" else torch.float32
    unet.requires_grad_(False)
    unet.to(accelerator.device, dtype=weight_dtype)
    text_encoder.to(accelerator.device, dtype=weight_dtype)
    unet.add_adapter(LoraConfig(r=4, target_modules=["to_q", "to_v"]))
    if args.train_text_encoder:
        text_encoder.add_adapter(LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    if args.mixed_precision == "fp16":
        trained = [unet]
        if args.train_text_encoder:
            trained.append(text_encoder)
            cast_training_params(trained, dtype=torch.float32)  # ampdoctor: expect[AMP105]
    optimizer = torch.optim.AdamW([p for p in unet.parameters() if p.requires_grad], lr=1e-4)
    return accelerator.prepare(unet, text_encoder, optimizer)
