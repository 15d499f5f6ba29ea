# bghira/SimpleTuner#67 (SDXL): the VAE runs in fp16 while the trained denoiser is bf16; the fp16 latents meet
# bf16 noise in the forward-diffusion step. The add promotes the pair to fp32 and the step runs (torch 2.13, CPU; a
# convolution fed the pair fails instead, as the linear of the next case does): a warning.
import torch
from torch import nn

torch.manual_seed(0)
vae_encoder = nn.Linear(16, 8).half().requires_grad_(False)  # frozen fp16 VAE
denoiser = nn.Sequential(nn.Linear(8, 32), nn.SiLU(), nn.Linear(32, 8)).to(torch.bfloat16)
optimizer = torch.optim.AdamW(denoiser.parameters(), lr=1e-4)

with torch.no_grad():
    latents = vae_encoder(torch.randn(4, 16, dtype=torch.float16))
noise = torch.randn(4, 8, dtype=torch.bfloat16)
alpha, sigma = 0.8, 0.6
noisy = latents * alpha + noise * sigma  # ampdoctor: expect[AMP121:warning]
pred = denoiser(noisy.to(torch.bfloat16))
loss = (pred.float() - noise.float()).pow(2).mean()
loss.backward()
optimizer.step()
