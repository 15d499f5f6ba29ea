# The fix for bghira/SimpleTuner#67: one half type end to end; the VAE latents are cast to the denoiser's bf16
# weight dtype at the boundary, before they meet the noise.
import torch
from torch import nn

torch.manual_seed(0)
vae_encoder = nn.Linear(16, 8).half().requires_grad_(False)  # frozen fp16 VAE
denoiser = nn.Sequential(nn.Linear(8, 32), nn.SiLU(), nn.Linear(32, 8)).to(torch.bfloat16)
optimizer = torch.optim.AdamW(denoiser.parameters(), lr=1e-4)

with torch.no_grad():
    latents = vae_encoder(torch.randn(4, 16, dtype=torch.float16)).to(torch.bfloat16)
noise = torch.randn(4, 8, dtype=torch.bfloat16)
alpha, sigma = 0.8, 0.6
noisy = latents * alpha + noise * sigma
pred = denoiser(noisy)
loss = (pred.float() - noise.float()).pow(2).mean()
loss.backward()
optimizer.step()
