# huggingface/diffusers#9405: the integer timestep is cast to the bf16 weight dtype before it is divided by 1000,
# so 750 becomes 752.
import torch

WEIGHT_DTYPE = torch.bfloat16


def embed_timesteps(timesteps, time_proj):
    timesteps = timesteps.to(WEIGHT_DTYPE)  # ampdoctor: expect[AMP103]
    return time_proj(timesteps / 1000)
