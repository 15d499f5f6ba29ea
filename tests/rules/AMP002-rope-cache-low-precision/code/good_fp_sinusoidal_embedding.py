# Additive sinusoidal position (and diffusion timestep) embeddings use sin and cos too, but they are features added
# to the input, not a rotary table: casting them to the model dtype is fine (GPT-NeoX SinusoidalPositionalEmbedding).
import math

import torch


class SinusoidalPositionalEmbedding(torch.nn.Module):
    def forward(self, x):
        t = torch.arange(x.shape[1], device=x.device).float()
        inv = 1.0 / (10000 ** (torch.arange(0, 64, 2).float() / 64))
        angles = torch.einsum("i,j->ij", t, inv)
        sin, cos = angles.sin().bfloat16(), angles.cos().bfloat16()
        return torch.cat((sin, cos), dim=-1)[None]


def timestep_embedding(timesteps, dim):
    freqs = torch.exp(-math.log(10000) * torch.arange(dim // 2, dtype=torch.float32) / (dim // 2))
    args = timesteps[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1).to(torch.bfloat16)
