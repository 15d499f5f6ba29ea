# A DPO diffusion step runs the frozen fp16 reference UNet on integer timesteps drawn below the scheduler's 1000
# training steps: fp16 holds every integer up to 2048 exactly, so the cast loses nothing.
import torch


def reference_prediction(ref_unet, noise_scheduler, latents, encoder_hidden_states):
    timesteps = torch.randint(0, noise_scheduler.config.num_train_timesteps, (latents.shape[0],), device=latents.device).repeat(2)
    return ref_unet(latents.half(), timesteps.half(), encoder_hidden_states.half()).sample


def small_range(latents, unet):
    timesteps = torch.randint(0, 200, (latents.shape[0],))  # a distillation's 200 steps: within bf16's 256
    positions = torch.randint(256, size=(4,))
    return unet(latents, timesteps.to(torch.bfloat16)), positions.bfloat16()
