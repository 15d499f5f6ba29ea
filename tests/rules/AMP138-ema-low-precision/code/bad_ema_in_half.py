# sd_dreambooth_extension PR #1415 and PaddleMIX PR #515: the EMA model was kept in the training's half dtype, and
# every (1 - decay) * (param - ema) update rounded to zero.
import copy

import torch
from diffusers.training_utils import EMAModel


def main(args, unet, accelerator):
    weight_dtype = torch.float32
    if args.mixed_precision == "fp16":
        weight_dtype = torch.float16
    ema_unet = EMAModel(unet.parameters(), decay=0.9999)
    ema_unet.to(accelerator.device, dtype=weight_dtype)  # ampdoctor: expect[AMP138]
    for batch in args.loader:
        accelerator.backward(unet(batch).mean())
        ema_unet.step(unet.parameters())


def shadow_copy(model, loader, optimizer):
    model = model.to(torch.bfloat16)
    ema_model = copy.deepcopy(model)  # ampdoctor: expect[AMP138]
    for batch in loader:
        model(batch).mean().backward()
        optimizer.step()
        with torch.no_grad():
            for e, p in zip(ema_model.parameters(), model.parameters()):
                e.lerp_(p, 1 - 0.999)


def wrapped(unet, accelerator, weight_dtype=torch.bfloat16):
    ema = EMAModel(unet, device=accelerator.device, dtype=weight_dtype)  # ampdoctor: expect[AMP138]
    ema.step(unet.parameters())
