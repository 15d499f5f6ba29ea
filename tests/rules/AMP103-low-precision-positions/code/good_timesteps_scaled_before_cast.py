# Timesteps divided into [0, 1] before the half cast: no longer integer positions (the rule's own fix).
import torch


def prepare(num_steps: int, device):
    timesteps = torch.linspace(1000, 0, num_steps, device=device)
    timesteps /= 1000  # scale to [0, 1]
    timesteps = timesteps.to(device, dtype=torch.bfloat16)
    return timesteps
