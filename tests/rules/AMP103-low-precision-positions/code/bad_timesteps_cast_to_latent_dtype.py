# A sampling loop casts each timestep to the dtype of the latents, which the code makes bf16: bf16 holds whole numbers
# exactly only up to 256, so 997, 998 and 999 all become 996 or 1000 before the timestep embedding sees them.
import torch


def sample(model, scheduler, height, width, device):
    latents = torch.randn(1, 16, height, width, device=device, dtype=torch.bfloat16)
    for t in scheduler.timesteps:
        timestep = t.expand(latents.shape[0]).to(latents.dtype)  # ampdoctor: expect[AMP103:info]
        noise_pred = model(latents, timestep)
        latents = scheduler.step(noise_pred, t, latents)
    return latents


def sample_from_helper(model, scheduler, make_noise, timesteps, device):
    # a helper handed one dtype, bf16, returns the latents in it
    latents = make_noise(2, 16, 64, 64, torch.bfloat16, device)
    for timestep in timesteps:
        timestep = timestep.type_as(latents)  # ampdoctor: expect[AMP103]
        latents = model(latents, timestep)
    return latents


def position_grid(length, device):
    # positions built in the dtype of a tensor made bf16 here: past 256 neighbouring positions collapse
    hidden = torch.zeros(1, length, 64, device=device, dtype=torch.bfloat16)
    return torch.arange(length, device=device, dtype=hidden.dtype)  # ampdoctor: expect[AMP103]
