"""`rope_report`: how much each way of building and applying RoPE tables costs, against float64 (ROPE.md part b).

Variants, all with the same float64 frequencies (`ampdoctor.nn.rope_frequencies`, so every HF scaling works):

- ``ampdoctor``: tables built in float64 and stored fp32 (`RotaryEmbedding`'s `build_tables`), fp32 math;
- ``fp32-table``: fp32 inverse frequencies, positions and angles, as HF builds them; fp32 math;
- ``bf16-table``: the fp32 table stored in bf16 (incident 2, modded-nanogpt #39); fp32 math;
- ``bf16-positions``: positions from ``arange`` in bf16, the rest fp32 (Megatron-LM #535);
- ``bf16-math``: bf16 q/k, bf16 table, bf16 elementwise math (HF/vLLM under bf16); its reference takes the
  bf16-rounded q/k, so only the rotation's own error is measured.

Per variant: ``cos_max_error`` (cos and sin tables against float64, over every position), the q·k logit error of unit
q/k at random positions n <= m (max, mean), and the relative-position violation |logit(q@P+r, k@P) - logit(q@r, k@0)|
within the variant, per position range. A model's own rotary modules can be measured as extra variants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch
from torch import nn

from ampdoctor.nn import RotaryEmbedding, apply_rotary, rope_frequencies
from ampdoctor.nn.rope_scaling import Frequencies
from ampdoctor.nn.rotary import build_tables
from ampdoctor.nn.rotary_math import rotate

VARIANTS: tuple[str, ...] = ("ampdoctor", "fp32-table", "bf16-table", "bf16-positions", "bf16-math")
DESCRIPTIONS = {
    "ampdoctor": "float64-built table stored fp32, fp32 math",
    "fp32-table": "fp32 angles (HF-style), fp32 math",
    "bf16-table": "fp32 angles, table cached in bf16, fp32 math",
    "bf16-positions": "positions from arange in bf16, fp32 angles and math",
    "bf16-math": "bf16 q/k, bf16 table, bf16 math",
}
# Position ranges the relative-position violation is reported for (clipped to max_position).
RANGE_BOUNDS = (0, 4096, 32768)
# Offsets r between query and key in the violation test.
OFFSETS = (1, 17, 256, 1000)


@dataclass(frozen=True)
class Variant:
    """The tables one variant uses ([positions, rotary_dim // 2]) and the dtype its q/k and math run in."""

    name: str
    description: str
    cos: torch.Tensor
    sin: torch.Tensor
    math_dtype: torch.dtype


@dataclass(frozen=True)
class RangeViolation:
    start: int
    end: int
    max: float
    mean: float

    @property
    def label(self) -> str:
        return f"[{_short(self.start)}, {_short(self.end)})"


def _short(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


@dataclass(frozen=True)
class VariantResult:
    name: str
    description: str
    cos_max_error: float
    cos_mean_error: float
    logit_max_error: float
    logit_mean_error: float
    violations: tuple[RangeViolation, ...]
    # (first position of a bucket, largest cos/sin error in it): the error-vs-position curve.
    by_position: tuple[tuple[int, float], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "description": self.description, "cos_max_error": self.cos_max_error, "cos_mean_error": self.cos_mean_error,
            "logit_max_error": self.logit_max_error, "logit_mean_error": self.logit_mean_error,
            "relative_position_violation": [{"range": v.label, "start": v.start, "end": v.end, "max": v.max, "mean": v.mean} for v in self.violations],
        }


@dataclass(frozen=True)
class RopeReport:
    head_dim: int
    base: float
    max_position: int
    scaling: Mapping[str, Any] | None
    variants: tuple[VariantResult, ...]

    def variant(self, name: str) -> VariantResult:
        return next(v for v in self.variants if v.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {"head_dim": self.head_dim, "base": self.base, "max_position": self.max_position, "scaling": dict(self.scaling or {}) or None,
                "variants": [v.to_dict() for v in self.variants]}


# --- tables ----------------------------------------------------------------------------------------


def _angle_tables(positions: torch.Tensor, inv_freq: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    angles = positions[:, None] * inv_freq[None, :]  # broadcast multiply, not a matmul: autocast cannot touch it
    return angles.cos() * scale, angles.sin() * scale


def standard_variants(freqs: Frequencies, length: int) -> list[Variant]:
    inv32 = freqs.inv_freq.to(torch.float32)
    scale = freqs.attention_factor
    cos32, sin32 = _angle_tables(torch.arange(length, dtype=torch.float32), inv32, scale)
    cos_ad, sin_ad = build_tables(freqs, length)
    # The bf16-positions variant measures the hazard AMP103 names.
    cos_pb, sin_pb = _angle_tables(torch.arange(length, dtype=torch.bfloat16).to(torch.float32), inv32, scale)  # ampdoctor: ignore[AMP103]
    bf = torch.bfloat16
    return [
        Variant("ampdoctor", DESCRIPTIONS["ampdoctor"], cos_ad, sin_ad, torch.float32),
        Variant("fp32-table", DESCRIPTIONS["fp32-table"], cos32, sin32, torch.float32),
        Variant("bf16-table", DESCRIPTIONS["bf16-table"], cos32.to(bf).to(torch.float32), sin32.to(bf).to(torch.float32), torch.float32),
        Variant("bf16-positions", DESCRIPTIONS["bf16-positions"], cos_pb, sin_pb, torch.float32),
        Variant("bf16-math", DESCRIPTIONS["bf16-math"], cos32.to(bf), sin32.to(bf), bf),
    ]


# --- measurements ----------------------------------------------------------------------------------


def _rotated(v: Variant, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """x ([n, head_dim] float64) rotated by the variant at `positions`, read back as float64."""
    xs = x.to(v.math_dtype)
    cos, sin = v.cos[positions], v.sin[positions]
    if v.name == "ampdoctor":
        return apply_rotary(xs, cos, sin, backend="eager").to(torch.float64)
    return rotate(xs, cos, sin, False, False).to(torch.float64)


def _reference_rotated(ref: Variant, v: Variant, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    # A bf16-math reference starts from the bf16-rounded inputs: it measures the rotation, not the input rounding.
    start = x.to(v.math_dtype).to(torch.float64) if v.math_dtype not in (torch.float32, torch.float64) else x
    return rotate(start, ref.cos[positions], ref.sin[positions], False, False)


def _units(n: int, dim: int, gen: torch.Generator) -> torch.Tensor:
    x = torch.randn(n, dim, dtype=torch.float64, generator=gen)
    return x / x.norm(dim=-1, keepdim=True)


def _logit(v: Variant, q: torch.Tensor, k: torch.Tensor, n: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    return (_rotated(v, q, n) * _rotated(v, k, m)).sum(-1)


def _violations(v: Variant, length: int, head_dim: int, samples: int, seed: int) -> tuple[RangeViolation, ...]:
    out = []
    bounds = [b for b in RANGE_BOUNDS if b < length] + [length]
    for start, end in zip(bounds, bounds[1:]):
        gen = torch.Generator().manual_seed(seed + start)
        offsets = torch.tensor([r for r in OFFSETS if r < end - start] or [0])
        r = offsets[torch.randint(len(offsets), (samples,), generator=gen)]
        p = start + (torch.rand(samples, generator=gen, dtype=torch.float64) * (end - start - r).to(torch.float64)).long()
        q, k = _units(samples, head_dim, gen), _units(samples, head_dim, gen)
        diff = (_logit(v, q, k, p + r, p) - _logit(v, q, k, r, torch.zeros_like(r))).abs()
        out.append(RangeViolation(start, end, float(diff.max()), float(diff.mean())))
    return tuple(out)


def _by_position(errors: torch.Tensor, buckets: int = 128) -> tuple[tuple[int, float], ...]:
    n = errors.numel()
    size = max(1, -(-n // buckets))
    return tuple((start, float(errors[start:start + size].max())) for start in range(0, n, size))


def measure(v: Variant, ref: Variant, *, head_dim: int, pairs: int, samples: int, seed: int) -> VariantResult:
    length = ref.cos.shape[0]
    err = torch.maximum((v.cos.to(torch.float64) - ref.cos).abs(), (v.sin.to(torch.float64) - ref.sin).abs())
    per_position = err.max(dim=-1).values
    gen = torch.Generator().manual_seed(seed)
    a, b = torch.randint(length, (pairs,), generator=gen), torch.randint(length, (pairs,), generator=gen)
    n, m = torch.minimum(a, b), torch.maximum(a, b)
    q, k = _units(pairs, head_dim, gen), _units(pairs, head_dim, gen)
    exact = (_reference_rotated(ref, v, q, n) * _reference_rotated(ref, v, k, m)).sum(-1)
    logit_err = (_logit(v, q, k, n, m) - exact).abs()
    return VariantResult(v.name, v.description, float(err.max()), float(err.mean()), float(logit_err.max()), float(logit_err.mean()),
                         _violations(v, length, head_dim, samples, seed), _by_position(per_position))


def rope_report(
    head_dim: int = 128,
    base: float = 10000.0,
    max_position: int = 4096,
    scaling: Mapping[str, Any] | None = None,
    *,
    model: nn.Module | None = None,
    pairs: int = 8192,
    samples: int = 1024,
    seed: int = 0,
) -> RopeReport:
    """Measure every standard variant (and the rotary modules of `model`, if given) for positions ``0..max_position-1``."""
    if head_dim <= 0 or head_dim % 2 or max_position < 2:
        raise ValueError(f"head_dim must be a positive even number and max_position at least 2, got {head_dim} and {max_position}")
    freqs = rope_frequencies(head_dim, base, scaling, max_position=max_position)
    positions = torch.arange(max_position, dtype=torch.float64)
    ref_cos, ref_sin = _angle_tables(positions, freqs.inv_freq, freqs.attention_factor)
    ref = Variant("float64", "reference", ref_cos, ref_sin, torch.float64)
    variants = standard_variants(freqs, max_position)
    if model is not None:
        variants += model_variants(model, head_dim, max_position)
    results = tuple(measure(v, ref, head_dim=head_dim, pairs=pairs, samples=samples, seed=seed) for v in variants)
    return RopeReport(head_dim, float(base), max_position, dict(scaling) if scaling else None, results)


# --- rotary modules of a live model ----------------------------------------------------------------


def _module_tables(module: nn.Module, head_dim: int, length: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """cos/sin [length, head_dim // 2] as the module produces them: `RotaryEmbedding.cos_sin`, or an HF-style
    ``forward(x, position_ids) -> (cos, sin)`` whose last axis repeats the half table."""
    ids = torch.arange(length)[None, :]
    if isinstance(module, RotaryEmbedding):
        if module.rotary_dim != head_dim:
            return None
        cos, sin = module.cos_sin(ids)
        return cos.reshape(length, -1), sin.reshape(length, -1)
    inv = getattr(module, "inv_freq", None)
    if not isinstance(inv, torch.Tensor) or inv.numel() * 2 != head_dim:
        return None
    dtype = next((p.dtype for p in module.parameters()), inv.dtype if inv.is_floating_point() else torch.float32)
    try:
        with torch.no_grad():
            cos, sin = module(torch.zeros(1, length, head_dim, dtype=dtype), ids)
    except Exception:  # noqa: BLE001 - a rotary module with another call signature is not measured
        return None
    half = head_dim // 2
    return cos.reshape(length, -1)[:, :half], sin.reshape(length, -1)[:, :half]


def model_variants(model: nn.Module, head_dim: int, length: int) -> list[Variant]:
    """The rotary modules inside `model` whose rotary dim is `head_dim`, as variants named ``model:<module>``; their
    math runs in the dtype of the tables they return (HF casts cos/sin to the activations' dtype)."""
    out = []
    for name, module in model.named_modules():
        tables = _module_tables(module, head_dim, length)
        if tables is None:
            continue
        cos, sin = tables
        math_dtype = torch.float32 if cos.dtype in (torch.float32, torch.float64) else cos.dtype
        out.append(Variant(f"model:{name or '<root>'}", f"{type(module).__name__} tables in {str(cos.dtype).removeprefix('torch.')}",
                           cos.to(math_dtype), sin.to(math_dtype), math_dtype))
    return out

