# fp16 loads that the optimizer never steps in fp16: the UNet is upcast before the optimizer is built (whatever
# precision the run picks); the text encoder is frozen and only its adapters train.
import torch
from accelerate import Accelerator
from diffusers import UNet2DConditionModel
from transformers import CLIPTextModel


def main(args, loader):
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    unet = UNet2DConditionModel.from_pretrained(args.model, subfolder="unet", torch_dtype=torch.float16)
    unet = unet.to(dtype=torch.float32)
    optimizer = torch.optim.AdamW(unet.parameters(), lr=args.lr)
    unet, optimizer, loader = accelerator.prepare(unet, optimizer, loader)
    for batch in loader:
        accelerator.backward(unet(batch).float().mean())
        optimizer.step()


def tune_text_encoder(args, loader, adapters):
    accelerator = Accelerator(mixed_precision="fp16")
    text_encoder = CLIPTextModel.from_pretrained(args.model, subfolder="text_encoder", torch_dtype=torch.float16)
    for p in text_encoder.parameters():
        p.requires_grad = False
    params = [*adapters.parameters(), *text_encoder.parameters()]
    optimizer = torch.optim.AdamW(params, lr=args.lr)
    text_encoder, optimizer, loader = accelerator.prepare(text_encoder, optimizer, loader)
    for batch in loader:
        accelerator.backward(text_encoder(batch).last_hidden_state.float().mean())
        optimizer.step()
