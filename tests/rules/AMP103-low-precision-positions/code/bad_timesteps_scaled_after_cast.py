# The division comes after the cast: the bf16 cast already rounded timesteps above 256.
import torch


def prepare(num_steps: int, device):
    timesteps = torch.linspace(1000, 0, num_steps, device=device).round()
    timesteps = timesteps.to(device, dtype=torch.bfloat16)  # ampdoctor: expect[AMP103]
    timesteps /= 1000
    return timesteps
