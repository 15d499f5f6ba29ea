"""A small GPT with rotary attention whose cos/sin table precision is a switch.

Byte-level (vocab 256), pre-norm blocks, no biases, no learned positions: RoPE carries all position
information, so its table precision is the only thing that differs between the variants below.

The RoPE variants (`--rope-table`) form a 2 x 2 design plus ampdoctor's component, to pull apart the two
things incident 2 (modded-nanogpt #39: ``self.cos_cached = freqs.cos().bfloat16()``) changed at once:

    variant      table values                   rotation arithmetic
    fp32         fp32 (angles built in fp32)    fp32, one rounding to q's dtype at the end
    bf16-table   fp32 table rounded to bf16     fp32, one rounding at the end       -> table precision only
    bf16-math    fp32                           every product and sum rounded to bf16 -> arithmetic only
    bf16         rounded to bf16                every product and sum rounded to bf16 -> the incident
    ampdoctor    ampdoctor.nn.RotaryEmbedding (float64-built fp32 table) + apply_rotary (fp32 math)

"bf16-table" and "bf16-math" are the two halves of the incident; "fp32" vs "ampdoctor" differ only in how the
fp32 table was built (fp32 angles vs float64 angles rounded once).

The fp32 table is built the way modded-nanogpt's fix built it: fp32 positions times fp32 inverse
frequencies, then cos/sin, so its error grows with position (ROPE.md table (b), variant "(c) FP32").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ampdoctor.nn import RotaryEmbedding

ROPE_TABLES = ("fp32", "bf16", "bf16-table", "bf16-math", "ampdoctor")


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 256  # bytes
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 256
    seq_len: int = 1024
    rope_base: float = 10000.0
    rope_table: str = "fp32"

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head


def fp32_angle_tables(head_dim: int, length: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin [length, head_dim // 2] from fp32 angles, as modded-nanogpt built them."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(length, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def rotate_half_layout(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, bf16_math: bool) -> torch.Tensor:
    """Rotate pairs (x[i], x[i + d/2]) of ``x`` [B, H, T, D] by angle tables [T, D/2]; returns x's dtype.

    With ``bf16_math`` every product and every sum is rounded to bf16, which is exactly what PyTorch's bf16
    elementwise ops compute (each op runs in fp32 and rounds its result); the products of two bf16 numbers
    are exact in fp32, so for a bf16 table this equals the incident's ``x1 * cos + x2 * sin`` on bf16
    tensors. Otherwise the math is fp32 and only the result is rounded to x's dtype.
    """
    x1, x2 = x.float().chunk(2, dim=-1)
    if not bf16_math:
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)
    x1, x2 = x1.bfloat16().float(), x2.bfloat16().float()  # the incident's q/k were bf16 going in

    def bf(t: torch.Tensor) -> torch.Tensor:
        return t.bfloat16()

    y1 = bf(x1 * cos) - bf(x2 * sin)  # bf16 - bf16: rounded again
    y2 = bf(x2 * cos) + bf(x1 * sin)
    return torch.cat((y1, y2), dim=-1).to(x.dtype)


class Rotary(nn.Module):
    """RoPE for q and k [B, H, T, D], with the table precision and arithmetic of ``variant``.

    ``variant`` can be switched after training (`set_variant`) to evaluate the same weights under every
    table: that measures the direct effect of the table on the loss, without training noise.
    """

    def __init__(self, head_dim: int, max_len: int, base: float, variant: str) -> None:
        super().__init__()
        self.head_dim, self.max_len, self.base = head_dim, max_len, base
        cos, sin = fp32_angle_tables(head_dim, max_len, base)
        # Plain attributes, not buffers: model.to(bf16) must not change the experiment's tables.
        self.cos32, self.sin32 = cos, sin
        # bf16 values held in fp32: the experiment measures incident 2 on purpose.
        self.cos16, self.sin16 = cos.bfloat16().float(), sin.bfloat16().float()  # ampdoctor: ignore[AMP002]
        # Eager on the CPU: compiling the rotation costs more seconds than a short CPU run saves. On a GPU the
        # default ("auto": compiled for large inputs) is what a user of the component gets.
        self.safe = RotaryEmbedding(head_dim, base=base, max_position=max_len, backend="eager")
        self.set_variant(variant)

    def set_variant(self, variant: str) -> None:
        if variant not in ROPE_TABLES:
            raise ValueError(f"unknown rope table {variant!r}: expected one of {', '.join(ROPE_TABLES)}")
        self.variant = variant

    def _apply(self, fn, recurse=True):  # type: ignore[no-untyped-def]
        # Follow device moves only (see the comment in __init__).
        super()._apply(fn, recurse)
        device = fn(torch.empty(0, device=self.cos32.device)).device
        for name in ("cos32", "sin32", "cos16", "sin16"):
            setattr(self, name, getattr(self, name).to(device))
        self.safe.backend = "eager" if device.type == "cpu" else "auto"
        return self

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        T = q.shape[2]
        if self.variant == "ampdoctor":
            return self.safe(q, k)  # positions 0..T-1: a view of its fp32 table, then apply_rotary
        bf16_table = self.variant in ("bf16", "bf16-table")
        bf16_math = self.variant in ("bf16", "bf16-math")
        cos = (self.cos16 if bf16_table else self.cos32)[:T]
        sin = (self.sin16 if bf16_table else self.sin32)[:T]
        return rotate_half_layout(q, cos, sin, bf16_math), rotate_half_layout(k, cos, sin, bf16_math)


class Attention(nn.Module):
    def __init__(self, config: GPTConfig, rotary: Rotary) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.proj = nn.Linear(config.d_model, config.d_model, bias=False)
        self.rotary = rotary

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4)
        q, k = self.rotary(q, k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.up = nn.Linear(config.d_model, 4 * config.d_model, bias=False)
        self.down = nn.Linear(4 * config.d_model, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self, config: GPTConfig, rotary: Rotary) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(config.d_model, bias=False)
        self.attn = Attention(config, rotary)
        self.norm2 = nn.LayerNorm(config.d_model, bias=False)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        # One rotary module shared by every layer: one table, one switch.
        self.rotary = Rotary(config.head_dim, config.seq_len, config.rope_base, config.rope_table)
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config, self.rotary) for _ in range(config.n_layer))
        self.norm = nn.LayerNorm(config.d_model, bias=False)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.head.weight = self.embed.weight  # tied: fewer parameters to train on a CPU budget
        self.apply(self._init)
        for block in self.blocks:  # residual projections scaled down with depth (GPT-2)
            for proj in (block.attn.proj, block.mlp.down):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits [B, T, vocab] for byte ids [B, T]."""
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def token_losses(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-token cross-entropy [B, T], in fp32 whatever the compute dtype."""
    logits = model(x)
    return F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), reduction="none").view_as(y)
