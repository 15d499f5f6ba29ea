"""`RotaryEmbedding`: RoPE whose tables cannot be in the wrong precision.

Incidents 2 and 5, GPT-NeoX #1003, transformers #25681 / PR #29285, Megatron #535 and vLLM #863 are all a
table or a position held in too few bits. Here:

- positions are integers and index the table (no float positions: bf16 is exact only up to 256, AMP103);
- tables are built in float64 on the CPU with an elementwise outer product (no matmul, so neither autocast
  nor TF32 can touch it, AMP101/AMP104), and stored as fp32: within 3e-8 of the exact value at any position;
- tables are plain attributes, not buffers: ``module.to(bf16)``, ``.half()``, FSDP/DeepSpeed casts and
  ``state_dict`` never see them, and `_apply` only moves them to the new device;
- the table grows on demand past ``max_position``, built the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch
from torch import nn

from ampdoctor.nn.rope_scaling import ROPE_SCALINGS, Frequencies, rope_frequencies, validate_scaling
from ampdoctor.nn.rotary_math import BACKENDS, Backend, Layout, apply_rotary, check_layout, triton_rotary, use_triton


@dataclass(frozen=True)
class _Tables:
    frequencies: Frequencies
    cos: torch.Tensor  # fp32 [length, rotary_dim // 2]
    sin: torch.Tensor

    @property
    def length(self) -> int:
        return self.cos.shape[0]


def build_tables(frequencies: Frequencies, length: int, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 cos/sin of ``position * inv_freq`` for positions ``0..length-1``, computed in float64 on the CPU."""
    positions = torch.arange(length, dtype=torch.float64, device="cpu")
    angles = positions[:, None] * frequencies.inv_freq.to(device="cpu", dtype=torch.float64)[None, :]
    scale = frequencies.attention_factor
    cos = (angles.cos() * scale).to(device=device, dtype=torch.float32)
    sin = (angles.sin() * scale).to(device=device, dtype=torch.float32)
    return cos, sin


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"RotaryEmbedding: {name} must be a positive int, got {value!r}")
    return value


def check_position_dtype(position_ids: Any) -> torch.Tensor:
    """Reject anything but an integer tensor, with the reason (no look at the values: no host synchronisation)."""
    if not isinstance(position_ids, torch.Tensor):
        raise TypeError(f"position_ids must be an integer torch.Tensor, got {type(position_ids).__name__}")
    if position_ids.is_floating_point() or position_ids.is_complex() or position_ids.dtype == torch.bool:
        raise TypeError(
            f"position_ids must be an integer tensor (int32/int64), got {position_ids.dtype}: float positions are "
            "not exact (bf16 holds integers only up to 256, fp16 up to 2048) and alias neighbouring tokens"
        )
    return position_ids


def check_positions(position_ids: Any) -> torch.Tensor:
    """Reject anything but an integer tensor of non-negative positions, with the reason."""
    position_ids = check_position_dtype(position_ids)
    if position_ids.numel() and int(position_ids.min()) < 0:
        raise ValueError(f"position_ids must be >= 0, got minimum {int(position_ids.min())}")
    return position_ids


def _check_position_shape(position_ids: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
    if position_ids.dim() not in (1, 2) or position_ids.shape[-1] != seq:
        raise ValueError(f"position_ids must be [seq] or [batch, seq] with seq={seq}, got shape {tuple(position_ids.shape)}")
    if position_ids.dim() == 2 and position_ids.shape[0] not in (1, batch):
        raise ValueError(f"position_ids batch {position_ids.shape[0]} does not match q/k batch {batch}")
    return position_ids


def hf_rope_arguments(config: Any) -> dict[str, Any]:
    """RotaryEmbedding arguments from a transformers config: ``rope_parameters`` (v5) or ``rope_theta`` +
    ``rope_scaling`` + ``partial_rotary_factor`` (v4)."""
    params = dict(getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {})
    base = params.pop("rope_theta", None) or getattr(config, "rope_theta", None) or 10000.0
    partial = params.pop("partial_rotary_factor", None) or getattr(config, "partial_rotary_factor", None) or 1.0
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    original = getattr(config, "original_max_position_embeddings", None)
    if original is not None and params.get("rope_type", params.get("type")) in ("yarn", "longrope", "llama3"):
        # Phi3 keeps the pretraining length on the config; HF gives it priority over the dict.
        params["original_max_position_embeddings"] = original
    return {"head_dim": head_dim, "base": float(base), "max_position": int(config.max_position_embeddings),
            "rotary_dim": int(head_dim * float(partial)), "scaling": params or None}


class RotaryEmbedding(nn.Module):
    """Rotary position embedding for ``q, k`` of shape ``[batch, heads, seq, head_dim]``.

    ``scaling`` is an HF ``rope_scaling`` dict (``rope_type``: default, linear, dynamic, yarn, longrope,
    llama3); ``max_position`` plays HF's ``max_position_embeddings``. ``layout="half"`` pairs channel i with
    i + r/2 (NeoX/HF ``rotate_half``); ``"interleaved"`` pairs 2i with 2i+1 (GPT-J/Meta). With ``rotary_dim <
    head_dim`` only the first ``rotary_dim`` channels rotate. ``backend``: ``"auto"`` takes the Triton kernel for
    CUDA tensors when triton imports (`ampdoctor.nn.rope_triton`), else `torch.compile` for large inputs and
    eager for small ones; ``"triton"``, ``"compile"`` and ``"eager"`` force one.
    """

    def __init__(
        self,
        head_dim: int,
        base: float = 10000.0,
        max_position: int = 4096,
        rotary_dim: int | None = None,
        layout: Layout = "half",
        scaling: Mapping[str, Any] | None = None,
        *,
        backend: Backend = "auto",
    ) -> None:
        super().__init__()
        self.head_dim = _positive_int("head_dim", head_dim)
        self.rotary_dim = head_dim if rotary_dim is None else _positive_int("rotary_dim", rotary_dim)
        if self.rotary_dim % 2 or self.rotary_dim > head_dim:
            raise ValueError(f"RotaryEmbedding: rotary_dim must be even and <= head_dim ({head_dim}), got {self.rotary_dim}")
        if isinstance(base, bool) or not isinstance(base, (int, float)) or not base > 1:
            raise ValueError(f"RotaryEmbedding: base must be a number > 1, got {base!r}")
        self.base = float(base)
        self.max_position = _positive_int("max_position", max_position)
        check_layout(layout)
        self.layout: Layout = layout
        if backend not in BACKENDS:
            raise ValueError(f"RotaryEmbedding: unknown backend {backend!r}: expected one of {', '.join(BACKENDS)}")
        self.backend: Backend = backend
        self.scaling_type = validate_scaling(scaling, self.rotary_dim)
        self.scaling = dict(scaling or {})
        self._check_hf_keys()
        self._length_dependent = ROPE_SCALINGS[self.scaling_type].length_dependent
        self._device = torch.device("cpu")
        self._tables = self._build(self._frequencies(0), self.max_position)

    @classmethod
    def from_hf_config(cls, config: Any, **kwargs: Any) -> "RotaryEmbedding":
        """The rotary embedding a transformers config describes; ``kwargs`` go to the constructor (layout, backend)."""
        return cls(**hf_rope_arguments(config), **kwargs)

    def _check_hf_keys(self) -> None:
        # HF rope_parameters dicts repeat rope_theta and partial_rotary_factor; they must agree with ours.
        theta = self.scaling.get("rope_theta")
        if theta is not None and float(theta) != self.base:
            raise ValueError(f"RotaryEmbedding: scaling['rope_theta']={theta} disagrees with base={self.base}")
        factor = self.scaling.get("partial_rotary_factor")
        if factor is not None and int(self.head_dim * float(factor)) != self.rotary_dim:
            raise ValueError(
                f"RotaryEmbedding: scaling['partial_rotary_factor']={factor} gives rotary_dim "
                f"{int(self.head_dim * float(factor))}, but rotary_dim={self.rotary_dim}"
            )

    # --- tables -------------------------------------------------------------------------------------

    def _frequencies(self, seq_len: int) -> Frequencies:
        return rope_frequencies(self.rotary_dim, self.base, self.scaling, max_position=self.max_position, seq_len=seq_len)

    def _build(self, frequencies: Frequencies, needed: int) -> _Tables:
        # Grow geometrically so a slowly lengthening context rebuilds O(log n) times.
        length = max(self.max_position, 1 << (max(needed, 1) - 1).bit_length())
        cos, sin = build_tables(frequencies, length, self._device)
        return _Tables(frequencies, cos, sin)

    def _tables_for(self, needed: int) -> _Tables:
        """Tables valid for positions ``< needed``; rebuilt when the length or (dynamic/longrope) frequencies change."""
        tables = self._tables
        if self._length_dependent:
            frequencies = self._frequencies(needed)
            if not (torch.equal(frequencies.inv_freq, tables.frequencies.inv_freq)
                    and frequencies.attention_factor == tables.frequencies.attention_factor):
                tables = self._build(frequencies, needed)
        if tables.cos.device != self._device or tables.length < needed:
            tables = self._build(tables.frequencies, needed)
        self._tables = tables
        return tables

    @property
    def inv_freq(self) -> torch.Tensor:
        """The float64 inverse frequencies of the current tables."""
        return self._tables.frequencies.inv_freq

    @property
    def attention_scaling(self) -> float:
        """The factor folded into cos/sin (YaRN / LongRoPE mscale; 1.0 otherwise)."""
        return self._tables.frequencies.attention_factor

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> "RotaryEmbedding":
        # Module casts and moves reach tensors only through _apply: take the device, never the dtype.
        super()._apply(fn, recurse)
        self._device = fn(torch.empty(0, device=self._device)).device
        return self

    # --- lookup -------------------------------------------------------------------------------------

    def cos_sin(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """fp32 ``cos, sin`` of shape ``position_ids.shape + (rotary_dim // 2,)``, attention scaling included."""
        position_ids = check_positions(position_ids)
        needed = int(position_ids.max()) + 1 if position_ids.numel() else 0
        tables = self._tables_for(needed)
        index = position_ids.to(device=tables.cos.device, dtype=torch.long)
        return tables.cos[index], tables.sin[index]

    def _cos_sin_for(self, position_ids: torch.Tensor | None, batch: int, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
        if position_ids is None:
            # Positions 0..seq-1: a view of the table, no gather.
            tables = self._tables_for(seq)
            return tables.cos[:seq], tables.sin[:seq]
        position_ids = _check_position_shape(check_positions(position_ids), batch, seq)
        return self.cos_sin(position_ids)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, position_ids: torch.Tensor | None = None, *,
        max_position_id: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate ``q`` and ``k`` (``[batch, heads, seq, head_dim]``; heads may differ, as in GQA); dtypes are kept.

        On the Triton path (CUDA tensors with triton installed, or ``backend="triton"``) one kernel rotates both,
        gathering table rows by ``position_ids`` itself; it never reads the positions on the host, so the table
        grows only when ``max_position_id`` (the largest position the caller will pass) says so, and a position
        past the table gives NaN rows. Length-dependent scalings (dynamic, longrope) without ``max_position_id``
        still read the maximum position, as they must to pick their frequencies."""
        for name, t in (("q", q), ("k", k)):
            if not isinstance(t, torch.Tensor) or t.dim() != 4 or t.shape[-1] != self.head_dim:
                shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"RotaryEmbedding: {name} must be [batch, heads, seq, {self.head_dim}], got {shape}")
        if q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2]:
            raise ValueError(f"RotaryEmbedding: q {tuple(q.shape)} and k {tuple(k.shape)} differ in batch or seq")
        if use_triton(q, self.backend) and q.dtype in (torch.float16, torch.bfloat16, torch.float32):
            return self._forward_triton(q, k, position_ids, max_position_id)
        cos, sin = self._cos_sin_for(position_ids, q.shape[0], q.shape[2])
        return (
            apply_rotary(q, cos, sin, self.layout, backend=self.backend),
            apply_rotary(k, cos, sin, self.layout, backend=self.backend),
        )

    def _forward_triton(self, q: torch.Tensor, k: torch.Tensor, position_ids: torch.Tensor | None,
                        max_position_id: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        seq = q.shape[2]
        if position_ids is None:
            needed = seq
        else:
            position_ids = _check_position_shape(check_position_dtype(position_ids), q.shape[0], seq)
            if max_position_id is not None:
                needed = _positive_int("max_position_id + 1", max_position_id + 1)
            elif self._length_dependent and position_ids.numel():
                needed = int(position_ids.max()) + 1  # the frequencies depend on it: this read syncs
            else:
                needed = 0  # the table as it is; positions past it come out NaN (checked on the device)
        tables = self._tables_for(needed)
        if position_ids is not None:
            position_ids = position_ids.to(tables.cos.device)
        return triton_rotary(required=True).rotary_qk(q, k, tables.cos, tables.sin, position_ids, layout=self.layout)

    def extra_repr(self) -> str:
        return (f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base}, max_position={self.max_position}, "
                f"layout={self.layout!r}, scaling={self.scaling_type!r}")
