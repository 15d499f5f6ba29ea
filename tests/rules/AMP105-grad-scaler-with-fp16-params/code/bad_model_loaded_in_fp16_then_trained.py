# A fine-tuning script falls back to the fp16 checkpoint when the fp32 one is missing and trains the UNet it loaded:
# with accelerate's fp16 mixed precision the loss is scaled, and the GradScaler refuses the fp16 gradients.
import itertools

import torch
from accelerate import Accelerator
from diffusers import UNet2DConditionModel


def main(args, text_encoder, loader):
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    try:
        unet = UNet2DConditionModel.from_pretrained(args.model, subfolder="unet", torch_dtype=torch.float32)
    except OSError:
        unet = UNet2DConditionModel.from_pretrained(args.model, subfolder="unet",
                                                    torch_dtype=torch.float16)  # ampdoctor: expect[AMP105]
    if args.use_lora:
        unet.requires_grad_(False)
        params = itertools.chain(*inject_lora(unet))
    else:
        params = itertools.chain(unet.parameters(), text_encoder.parameters()) if args.train_text else unet.parameters()
    optimizer = torch.optim.AdamW(params, lr=args.lr)
    unet, optimizer, loader = accelerator.prepare(unet, optimizer, loader)
    for batch in loader:
        loss = unet(batch).float().mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()


def inject_lora(unet):
    return []
