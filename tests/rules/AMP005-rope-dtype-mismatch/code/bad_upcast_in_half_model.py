# The same upcast inside a model this file casts to bf16 (no autocast): the angles come from the model's own bf16
# buffer, so cos/sin are bf16 next to the fp32 input and flash-attn's kernel fails: an error.
import torch
from torch import nn
from flash_attn.layers.rotary import apply_rotary_emb


class VisionBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, positions):
        angles = torch.outer(positions, self.inv_freq)
        cos, sin = angles.cos(), angles.sin()
        return self.proj(apply_rotary_emb(x.float(), cos, sin))  # ampdoctor: expect[AMP005:error]


model = VisionBlock(64)
model = model.to(torch.bfloat16)
