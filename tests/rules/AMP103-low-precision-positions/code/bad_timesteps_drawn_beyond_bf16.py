# The same draw cast to bf16, which holds integers exactly only up to 256: timesteps 997, 998 and 999 all become
# 996 or 1000.
import torch


def prediction(unet, noise_scheduler, latents):
    timesteps = torch.randint(0, noise_scheduler.config.num_train_timesteps, (latents.shape[0],), device=latents.device)
    return unet(latents.bfloat16(), timesteps.bfloat16()).sample  # ampdoctor: expect[AMP103]


def literal_bound(unet, latents):
    timesteps = torch.randint(0, 4000, (latents.shape[0],))
    return unet(latents.half(), timesteps.half()).sample  # ampdoctor: expect[AMP103]
