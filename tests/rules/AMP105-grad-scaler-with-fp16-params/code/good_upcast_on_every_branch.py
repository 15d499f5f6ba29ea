# The upcast runs on the fp16 path whatever the other flag says: after the flag's block, or on both of its sides.
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
        cast_training_params(trained, dtype=torch.float32)
    optimizer = torch.optim.AdamW([p for p in unet.parameters() if p.requires_grad], lr=1e-4)
    return accelerator.prepare(unet, text_encoder, optimizer)


def main_both_sides(args, unet, text_encoder):
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    weight_dtype = torch.float16 if accelerator.mixed_precision == "fp16" else torch.float32
    unet.to(accelerator.device, dtype=weight_dtype)
    text_encoder.to(accelerator.device, dtype=weight_dtype)
    unet.add_adapter(LoraConfig(r=4, target_modules=["to_q", "to_v"]))
    if args.train_text_encoder:
        text_encoder.add_adapter(LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
        cast_training_params([unet, text_encoder], dtype=torch.float32)
    else:
        cast_training_params(unet, dtype=torch.float32)
    optimizer = torch.optim.AdamW([p for p in unet.parameters() if p.requires_grad], lr=1e-4)
    return accelerator.prepare(unet, text_encoder, optimizer)


def text_encoder_only(args, unet, text_encoder):
    # only the text encoder gets adapters, under the flag that also gates their upcast
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    weight_dtype = torch.float16 if accelerator.mixed_precision == "fp16" else torch.float32
    text_encoder.to(accelerator.device, dtype=weight_dtype)
    if args.train_text_encoder:
        text_encoder.add_adapter(LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    if args.mixed_precision == "fp16":
        if args.train_text_encoder:
            cast_training_params(text_encoder, dtype=torch.float32)
    optimizer = torch.optim.AdamW([p for p in text_encoder.parameters() if p.requires_grad], lr=1e-4)
    return accelerator.prepare(text_encoder, optimizer)
