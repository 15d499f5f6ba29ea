# The fix of bad_input_cast_against_model_branch.py: the images are cast to the weight dtype only on the path where the
# autoencoder has it, and the critic gets them in its own dtype. A model that `prepare` wraps, or a call under
# `accelerator.autocast()`, takes fp32 inputs in a half run: autocast casts them. A transformers vision tower casts its
# `pixel_values` to its weights' dtype itself. A probe made fp32 and cast to fp16 on the side of a test where its input
# is cast to fp16 too (a later `if` of the same test) gets it in its own dtype on every path.
import argparse

import torch
from accelerate import Accelerator
from torch import nn
from transformers import CLIPVisionModel


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
    judge = nn.Sequential(nn.Conv2d(3, 1, 3))
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
    judge.to(accelerator.device, dtype=weight_dtype)
    denoiser.to(dtype=torch.float32)
    tower = CLIPVisionModel.from_pretrained("openai/clip-vit-base-patch32").to(accelerator.device, dtype=torch.float32)
    probe = nn.Conv2d(3, 1, 3).to(accelerator.device).float()
    if args.half_probe:
        probe.half()
    denoiser, judge, optimizer, loader = accelerator.prepare(denoiser, judge, optimizer, loader)
    for batch in loader:
        if args.autoencoder_path is not None:
            images = batch["images"].to(dtype=weight_dtype)
        else:
            images = batch["images"]
        latents = autoencoder.encode(images)
        loss = denoiser(latents.to(weight_dtype)).float().pow(2).mean()
        score = critic(batch["images"].to(dtype=weight_dtype))
        verdict = judge(batch["images"].float())
        embeds = tower(pixel_values=batch["images"].to(dtype=weight_dtype)).pooler_output
        probe_input = batch["images"].float()
        if args.half_probe:
            probe_input = probe_input.half()
        side = probe(probe_input) if args.half_probe else probe(batch["images"].float())
        with accelerator.autocast():
            again = critic(batch["images"].float())
        accelerator.backward(loss + score.mean() + verdict.mean() + again.mean() + embeds.mean() + side.mean())
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mixed_precision", default="no", choices=["no", "fp16", "bf16"])
    parser.add_argument("--autoencoder_path", default=None)
    parser.add_argument("--half_probe", action="store_true")
    main(parser.parse_args())
