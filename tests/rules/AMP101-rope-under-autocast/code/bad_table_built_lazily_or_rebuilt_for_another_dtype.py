# Two tables that the first forward builds under the trainer's CUDA autocast: one left None by the constructor
# (built lazily), one rebuilt whenever the activations' dtype differs from the table's, which bf16 autocast's
# activations always do at first: both compute their angles in bf16 in training.
import torch
from torch import nn


class LazyRotary(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))
        self.seq_len_cached = None
        self.cos_cached = None

    def forward(self, x):
        seq_len = x.shape[1]
        if seq_len != self.seq_len_cached:
            self.seq_len_cached = seq_len
            t = torch.arange(seq_len, device=x.device).type_as(self.inv_freq)
            freqs = torch.einsum("i,j->ij", t, self.inv_freq)  # ampdoctor: expect[AMP101:warning]
            self.cos_cached = torch.cat((freqs, freqs), dim=-1).cos()
        return self.cos_cached


class DtypeKeyedRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=2048, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))
        self._set_cos_sin_cache(max_position_embeddings, self.inv_freq.device)

    def _set_cos_sin_cache(self, seq_len, device):
        self.max_seq_len_cached = seq_len
        t = torch.arange(seq_len, device=device, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)  # ampdoctor: expect[AMP101:warning]
        self.cos_cached = torch.cat((freqs, freqs), dim=-1).cos()

    def forward(self, x, seq_len):
        if seq_len > self.max_seq_len_cached or x.dtype != self.cos_cached.dtype:
            self._set_cos_sin_cache(seq_len, x.device)
        return self.cos_cached[:seq_len]


def train_step(model, batch, optimizer):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()
