"""Incident 1 (EleutherAI/gpt-neox#1305): "expected scalar type BFloat16 but found Float" at a bmm.

DeepSpeed's bf16 engine casts the model to bf16, but NeoX's `precision` was left unset, so the
rotary embedding builds its cos/sin cache in fp32 as a plain attribute that `.to()` never touches.
`q * cos` promotes q to fp32, the attention probabilities follow, and the bmm with the bf16
values fails several ops (and one module) away from the cause.

Run: python examples/incidents/incident1_neox_rotary.py
Audit: ampdoctor run --policy bf16-true examples/incidents/incident1_neox_rotary.py
"""

import torch
import torch.nn as nn

torch.manual_seed(0)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim: int, precision: torch.dtype = torch.float32, base: float = 10000.0) -> None:
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.precision = precision
        self.seq_len_cached = None

    def forward(self, x: torch.Tensor, seq_len: int):
        if seq_len != self.seq_len_cached:
            self.seq_len_cached = seq_len
            t = torch.arange(seq_len, dtype=torch.float32)
            freqs = torch.einsum("i,j->ij", t, self.inv_freq.float())
            emb = torch.cat((freqs, freqs), dim=-1)
            # NeoX: the cache follows `precision`, which defaulted to fp32 when only the bf16 block was set.
            self.cos_cached = emb.cos()[None, :, :].to(self.precision)
            self.sin_cached = emb.sin()[None, :, :].to(self.precision)
        return self.cos_cached[:, :seq_len], self.sin_cached[:, :seq_len]


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.dense = nn.Linear(width, width)
        self.pos_enc = RotaryEmbedding(width // heads)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        b, s, w = h.shape
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4).flatten(1, 2)
        cos, sin = self.pos_enc(v, seq_len=s)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = torch.bmm(q, k.transpose(1, 2)) / (w // self.heads) ** 0.5
        causal = torch.ones(s, s, dtype=torch.bool).tril()
        probs = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        context = torch.bmm(probs, v)
        return self.dense(context.view(b, self.heads, s, -1).transpose(1, 2).reshape(b, s, w))


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + self.attn(self.ln(h))
        return h + self.mlp(self.ln(h))


class TinyNeoX(nn.Module):
    def __init__(self, vocab: int = 128, width: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.head = nn.Linear(width, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def main() -> None:
    model = TinyNeoX().to(torch.bfloat16)  # what DeepSpeed's bf16 engine does to the module
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 128, (2, 16))
    logits = model(ids)
    loss = nn.functional.cross_entropy(logits.float().flatten(0, 1), ids.flatten())
    loss.backward()
    optimizer.step()


if __name__ == "__main__":
    main()
