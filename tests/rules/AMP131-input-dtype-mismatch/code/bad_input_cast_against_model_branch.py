# A latent trainer with accelerate: the frozen autoencoder stays fp32 unless the run names a checkpoint of its own, and
# the images are cast to the run's weight dtype in every run. Accelerate autocasts only what `prepare` wraps (the
# denoiser): in a bf16 run without that option the autoencoder's first conv gets bf16 images beside fp32 weights.
# The frozen critic follows the weight dtype and gets images made fp32: the reverse, in the same runs.
import argparse

import torch
from accelerate import Accelerator
from torch import nn


class Autoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 4, 8, stride=8)

    def encode(self, images):
        return self.down(images)


def main(args):
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    autoencoder = Autoencoder()
    critic = nn.Sequential(nn.Conv2d(3, 1, 3))
    denoiser = nn.Conv2d(4, 4, 3, padding=1)
    optimizer = torch.optim.AdamW(denoiser.parameters())
    loader = torch.utils.data.DataLoader([{"images": torch.rand(3, 64, 64)}] * 8, batch_size=2)
    weight_dtype = torch.float32
    if accelerator.mixed_precision == "fp16":
        weight_dtype = torch.float16
    elif accelerator.mixed_precision == "bf16":
        weight_dtype = torch.bfloat16
    if args.autoencoder_path is None:
        autoencoder.to(accelerator.device, dtype=torch.float32)
    else:
        autoencoder.to(accelerator.device, dtype=weight_dtype)
    critic.to(accelerator.device, dtype=weight_dtype)
    denoiser, optimizer, loader = accelerator.prepare(denoiser, optimizer, loader)
    for batch in loader:
        images = batch["images"].to(dtype=weight_dtype)
        latents = autoencoder.encode(images)  # ampdoctor: expect[AMP131:warning]
        loss = denoiser(latents).float().pow(2).mean()
        score = critic(batch["images"].float())  # ampdoctor: expect[AMP131:warning]
        accelerator.backward(loss + score.mean())
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mixed_precision", default="no", choices=["no", "fp16", "bf16"])
    parser.add_argument("--autoencoder_path", default=None)
    main(parser.parse_args())
