# The fix of bad_fp32_tensor_into_half_layer.py: every input follows the weights' dtype; a layer kept in fp32 by
# name may take fp32 inputs; under autocast the layers take whatever comes.
import torch
from torch import nn


class Projector(nn.Module):
    _keep_in_fp32_modules = ["router"]

    def __init__(self, dim, hidden):
        super().__init__()
        self.proj = nn.Linear(dim, hidden)
        self.gate = nn.Linear(hidden, hidden)
        self.pool = nn.Conv1d(hidden, hidden, 1)
        self.router = nn.Linear(hidden, 4)

    @property
    def dtype(self):
        return self.proj.weight.dtype

    def forward(self, feats, scores):
        h = self.proj(feats.to(self.dtype))
        g = self.gate(scores.float().to(self.gate.weight.dtype))
        pad = torch.zeros(h.shape[0], h.shape[2], 4, device=h.device, dtype=self.dtype)
        pooled = self.pool(pad)
        logits = self.router(h.float())
        with torch.autocast("cuda", dtype=torch.bfloat16):
            extra = self.gate(scores.float())
        return h * g + extra, pooled, logits


class FrequencyEmbed(nn.Module):
    def __init__(self, bands, dim):
        super().__init__()
        self.register_buffer("bands", torch.linspace(1.0, 64.0, bands))
        self.mix = nn.Linear(bands, dim)

    def forward(self, t):
        scaled = self.mix(self.bands)
        return t.to(self.mix.weight.dtype)[:, None] * scaled
