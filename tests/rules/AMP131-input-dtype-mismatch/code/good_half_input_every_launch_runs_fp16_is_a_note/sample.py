# The unet and vae are cast to the run's weight dtype and given latents cast to fp16. Every launch line of the
# project runs the script with --mixed_precision fp16 (the default too), where the models are fp16 as well: only a
# run someone else starts in another precision meets the mismatch, so a note.
import argparse

import torch
from accelerate import Accelerator

parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", type=str, default="fp16", choices=["no", "fp16", "bf16"])
parser.add_argument("--steps", type=int, default=50)
args = parser.parse_args()


def main(unet, vae, scheduler, text_states):
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    weight_dtype = torch.float32
    if accelerator.mixed_precision == "fp16":
        weight_dtype = torch.float16
    elif accelerator.mixed_precision == "bf16":
        weight_dtype = torch.bfloat16
    unet.to(accelerator.device, dtype=weight_dtype)
    vae.to(accelerator.device, dtype=weight_dtype)
    latents = torch.randn(1, 4, 64, 64, device=accelerator.device)
    scheduler.set_timesteps(args.steps)
    with torch.no_grad():
        for t in scheduler.timesteps:
            noise = unet(latents.half(), t, encoder_hidden_states=text_states).sample  # ampdoctor: expect[AMP131:info]
            latents = scheduler.step(noise, t, latents).prev_sample
        return vae.decode(latents / 0.18215).sample


if __name__ == "__main__":
    main(None, None, None, None)
