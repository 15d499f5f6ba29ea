# The EMA copy is made before the cast or cast back to fp32; a half copy that is never averaged is no EMA.
import copy

import torch
from diffusers.training_utils import EMAModel


def main(args, unet, accelerator):
    ema_unet = EMAModel(unet.parameters(), decay=0.9999)
    ema_unet.to(accelerator.device)
    unet.to(accelerator.device, dtype=torch.float16)
    for batch in args.loader:
        accelerator.backward(unet(batch).mean())
        ema_unet.step(unet.parameters())


def shadow_copy(model, loader):
    model = model.to(torch.bfloat16)
    ema_model = copy.deepcopy(model)
    ema_model.float()
    for batch in loader:
        for e, p in zip(ema_model.parameters(), model.parameters()):
            e.lerp_(p.float(), 1 - 0.999)


def export(model):
    ema_export = copy.deepcopy(model).to(torch.float16)
    return ema_export


def wrapped(unet, accelerator):
    unet = unet.to(torch.bfloat16)
    ema = EMAModel(unet, device=accelerator.device, dtype=torch.float32)
    ema.step(unet.parameters())
