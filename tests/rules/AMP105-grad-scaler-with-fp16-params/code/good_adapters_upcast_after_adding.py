# The fix of diffusers PR #6119: after adding the adapters, the trainable parameters go back to fp32 on the fp16
# path, so the GradScaler unscales fp32 gradients.
import torch
from accelerate import Accelerator
from peft import LoraConfig


def main(args, unet, vae):
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    weight_dtype = torch.float32
    if accelerator.mixed_precision == "fp16":
        weight_dtype = torch.float16
    elif accelerator.mixed_precision == "bf16":
        weight_dtype = torch.bfloat16
    unet.requires_grad_(False)
    unet.to(accelerator.device, dtype=weight_dtype)
    vae.to(accelerator.device, dtype=weight_dtype)
    unet.add_adapter(LoraConfig(r=4, target_modules=["to_q", "to_v"]))
    if args.mixed_precision == "fp16":
        for param in unet.parameters():
            if param.requires_grad:
                param.data = param.to(torch.float32)
    params = [p for p in unet.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    unet, optimizer = accelerator.prepare(unet, optimizer)
    return unet, optimizer
