# A model cast to bf16 without autocast casts these buffers too. What that costs depends on how they are read:
# - cos/sin read back in the activations' dtype: bf16 activations round them there all the same (a note);
# - inv_freq read only by a rebuild past the cached length, which a run within it never takes (a note);
# - an inv_freq the forward multiplies by the positions on every call: bf16 angles (a warning).
import torch
from torch import nn


class CachedRotary(nn.Module):
    def __init__(self, dim, max_position_embeddings=2048, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)  # ampdoctor: expect[AMP002:info]
        self._build(max_position_embeddings)

    def _build(self, seq_len):
        self.max_seq_len_cached = seq_len
        t = torch.arange(seq_len, dtype=self.inv_freq.dtype)
        emb = torch.cat((torch.outer(t, self.inv_freq),) * 2, dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)  # ampdoctor: expect[AMP002:info]
        self.register_buffer("sin_cached", emb.sin(), persistent=False)  # ampdoctor: expect[AMP002:info]

    def forward(self, x, seq_len):
        if seq_len > self.max_seq_len_cached:
            self._build(seq_len)
        return self.cos_cached[:seq_len].to(dtype=x.dtype), self.sin_cached[:seq_len].type_as(x)


class PerCallRotary(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))  # ampdoctor: expect[AMP002:warning]

    def forward(self, x, position_ids):
        freqs = position_ids[:, :, None] * self.inv_freq
        return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)


class TinyLM(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.rotary = CachedRotary(dim)
        self.per_call = PerCallRotary(dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, pos):
        cos, sin = self.rotary(x, x.size(1))
        cos2, sin2 = self.per_call(x, pos)
        return self.proj(x * cos * cos2 + x * sin * sin2)


model = TinyLM().to(torch.bfloat16)
