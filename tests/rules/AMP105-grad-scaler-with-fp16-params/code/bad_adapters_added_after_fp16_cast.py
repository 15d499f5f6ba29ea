# diffusers PR #6119: the frozen base is cast to the run's weight dtype (fp16 under fp16 mixed precision), then
# adapters are added; PEFT creates them in the base layer's dtype, so every trainable weight is fp16 and the fp16
# run's GradScaler fails with "Attempting to unscale FP16 gradients".
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
    unet.add_adapter(LoraConfig(r=4, target_modules=["to_q", "to_v"]))  # ampdoctor: expect[AMP105]
    params = [p for p in unet.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    unet, optimizer = accelerator.prepare(unet, optimizer)
    return unet, optimizer
