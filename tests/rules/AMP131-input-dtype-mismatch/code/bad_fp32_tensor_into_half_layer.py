# A vision adapter of a multimodal model: the patch features are cast to the model's dtype, but the extra learnable
# query path is fed a tensor upcast with .float() and a fresh torch.zeros without dtype; with the model loaded in bf16
# (and no autocast) both linear layers meet fp32 inputs beside bf16 weights.
import torch
from torch import nn


class Projector(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.proj = nn.Linear(dim, hidden)
        self.gate = nn.Linear(hidden, hidden)
        self.pool = nn.Conv1d(hidden, hidden, 1)

    @property
    def dtype(self):
        return self.proj.weight.dtype

    def forward(self, feats, scores):
        h = self.proj(feats.to(self.dtype))
        g = self.gate(scores.float())  # ampdoctor: expect[AMP131:warning]
        pad = torch.zeros(h.shape[0], h.shape[2], 4, device=h.device)
        pooled = self.pool(pad)  # ampdoctor: expect[AMP131:warning]
        return h * g, pooled


class FrequencyEmbed(nn.Module):
    def __init__(self, bands, dim):
        super().__init__()
        self.register_buffer("bands", torch.linspace(1.0, 64.0, bands), persistent=False)
        self.mix = nn.Linear(bands, dim)

    def forward(self, t):
        scaled = self.mix(self.bands)  # ampdoctor: expect[AMP131:warning]
        return t.to(self.mix.weight.dtype)[:, None] * scaled
