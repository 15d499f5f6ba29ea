# The fp32 autocast region guards the timestep embedding only: the file expects to run under an outer bf16 autocast,
# and its rotary angles, computed outside that region, are a matmul autocast runs in bf16.
import torch


class VideoRope(torch.nn.Module):
    def __init__(self, dim, theta=10000.0):
        super().__init__()
        self.register_buffer("freqs", 1.0 / theta ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, grid):
        angles = grid.float()[..., None] @ self.freqs[None, :]  # ampdoctor: expect[AMP101]
        return angles.cos(), angles.sin()


def embed_timestep(embedder, timestep):
    with torch.autocast(device_type=timestep.device.type, dtype=torch.float32):
        return embedder(timestep.float())
