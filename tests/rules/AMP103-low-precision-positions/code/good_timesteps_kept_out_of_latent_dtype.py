# Timesteps cast to a latent dtype the code does not fix (the caller's), kept fp32 beside bf16 latents, or an
# embedding (not a timestep) cast to the latents' dtype: nothing says an integer timestep becomes half.
import torch


def sample(model, scheduler, latents):
    for t in scheduler.timesteps:
        timestep = t.expand(latents.shape[0]).to(latents.dtype)  # the caller's latents: fp32 for all this file says
        latents = model(latents, timestep)
    return latents


def sample_fp32_timesteps(model, scheduler, height, width, device):
    latents = torch.randn(1, 16, height, width, device=device, dtype=torch.bfloat16)
    for t in scheduler.timesteps:
        timestep = t.expand(latents.shape[0]).to(torch.float32)
        latents = model(latents, timestep)
    return latents


def sample_with_embedding(model, time_proj, scheduler, height, width, device):
    latents = torch.randn(1, 16, height, width, device=device, dtype=torch.bfloat16)
    for t in scheduler.timesteps:
        timestep_emb = time_proj(t.expand(latents.shape[0]).float()).to(latents.dtype)
        latents = model(latents, timestep_emb)
    return latents


def sample_from_helper(model, convert, timesteps, noise):
    # a helper handed two dtypes: which one its result holds is not known here
    latents = convert(noise, torch.float32, torch.bfloat16)
    for timestep in timesteps:
        timestep = timestep.type_as(latents)
        latents = model(latents, timestep)
    return latents


def position_grid(length, hidden):
    # the dtype of a tensor the caller passes: nothing here says it is half
    return torch.arange(length, device=hidden.device, dtype=hidden.dtype)


def short_grid(device):
    # eight positions: bf16 holds them exactly
    hidden = torch.zeros(1, 8, 64, device=device, dtype=torch.bfloat16)
    return torch.arange(0, 8, device=device, dtype=hidden.dtype)


def noise_levels(sigmas, latents, batch_size):
    # flow-matching noise levels in [0, 1], named timesteps when they are stored: no integers for bf16 to round
    latents = latents.to(torch.bfloat16)
    timesteps = sigmas.view(-1, 1).expand(batch_size, latents.shape[1]).to(torch.bfloat16)
    return timesteps
