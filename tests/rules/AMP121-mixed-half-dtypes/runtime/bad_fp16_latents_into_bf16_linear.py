# The fp16 VAE latents handed to the bf16 denoiser as they are: its first linear gets an fp16 input and bf16 weights,
# and addmm refuses the pair ("mat1 and mat2 must have the same dtype, but got Half and BFloat16"): the step fails,
# an error.
import torch
from torch import nn

torch.manual_seed(0)
vae_encoder = nn.Linear(16, 8).half().requires_grad_(False)  # frozen fp16 VAE
denoiser = nn.Sequential(nn.Linear(8, 32), nn.SiLU(), nn.Linear(32, 8)).to(torch.bfloat16)
optimizer = torch.optim.SGD(denoiser.parameters(), lr=1e-4)
with torch.no_grad():
    latents = vae_encoder(torch.randn(4, 16, dtype=torch.float16))
pred = denoiser(latents)  # ampdoctor: expect[AMP121:error]
pred.float().pow(2).mean().backward()
optimizer.step()
