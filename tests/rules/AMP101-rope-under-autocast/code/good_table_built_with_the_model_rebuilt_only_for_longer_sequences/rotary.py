# Tables built in the constructor, outside autocast; the forward rebuilds them only for a sequence longer than
# they were built for, which training at its configured length never sends. The rebuild would run under the
# trainer's CUDA autocast: a note that says when, not a warning.
import torch
from torch import nn


class CachedRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=4096, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)
        self._set_cos_sin_cache(max_position_embeddings, self.inv_freq.device)

    def _set_cos_sin_cache(self, seq_len, device):
        self.max_seq_len_cached = seq_len
        t = torch.arange(seq_len, device=device, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)  # ampdoctor: expect[AMP101:info]
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, x, seq_len):
        if seq_len > self.max_seq_len_cached:
            self._set_cos_sin_cache(seq_len, x.device)
        return self.cos_cached[:seq_len].to(x.dtype), self.sin_cached[:seq_len].to(x.dtype)


class InlineRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=4096, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)
        self.max_seq_len_cached = max_position_embeddings
        t = torch.arange(max_position_embeddings, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        self.register_buffer("cos_cached", freqs.cos(), persistent=False)

    def forward(self, x, seq_len):
        if seq_len > self.max_seq_len_cached:
            self.max_seq_len_cached = seq_len
            t = torch.arange(seq_len, device=x.device, dtype=self.inv_freq.dtype)
            freqs = torch.einsum("i,j->ij", t, self.inv_freq)  # ampdoctor: expect[AMP101:info]
            self.register_buffer("cos_cached", freqs.cos(), persistent=False)
        return self.cos_cached[:seq_len].to(x.dtype)
