"""RoPE scaling registry: a scaling name -> float64 inverse frequencies and an attention factor.

Mirrors transformers' ``ROPE_INIT_FUNCTIONS`` (``modeling_rope_utils.py``) and accepts the same
``rope_scaling`` / ``rope_parameters`` dicts, but every frequency is computed in float64 on the CPU:
the tables built from them are rounded to fp32 once, at the end (ROPE.md, variant F64C).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch


@dataclass(frozen=True)
class Frequencies:
    """``inv_freq``: float64 CPU tensor of shape ``(rotary_dim // 2,)``; ``attention_factor`` multiplies cos/sin."""

    inv_freq: torch.Tensor
    attention_factor: float


@dataclass(frozen=True)
class ScalingRule:
    build: Callable[[int, float, Mapping[str, Any], int, int], Frequencies]
    required: frozenset[str]
    optional: frozenset[str]
    # The frequencies depend on the longest position in the batch (dynamic NTK, LongRoPE short/long).
    length_dependent: bool = False


# Keys HF puts in every rope_parameters dict; RotaryEmbedding checks them against its own arguments.
COMMON_KEYS = frozenset({"rope_type", "type", "rope_theta", "partial_rotary_factor"})


def _default_inv_freq(dim: int, base: float) -> torch.Tensor:
    exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    return 1.0 / (float(base) ** exponents)


def _original_length(params: Mapping[str, Any], max_position: int) -> int:
    return int(params.get("original_max_position_embeddings") or max_position)


def _default(dim: int, base: float, params: Mapping[str, Any], max_position: int, seq_len: int) -> Frequencies:
    return Frequencies(_default_inv_freq(dim, base), 1.0)


def _linear(dim: int, base: float, params: Mapping[str, Any], max_position: int, seq_len: int) -> Frequencies:
    return Frequencies(_default_inv_freq(dim, base) / float(params["factor"]), 1.0)


def _dynamic(dim: int, base: float, params: Mapping[str, Any], max_position: int, seq_len: int) -> Frequencies:
    # HF dynamic NTK: within the original context the frequencies are the unscaled ones; beyond it the base
    # grows with the longest position so the lowest frequency still covers it.
    factor = float(params["factor"])
    original = _original_length(params, max_position)
    length = max(seq_len, original)
    scaled_base = float(base) * ((factor * length / original) - (factor - 1)) ** (dim / (dim - 2))
    return Frequencies(_default_inv_freq(dim, scaled_base), 1.0)


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn(dim: int, base: float, params: Mapping[str, Any], max_position: int, seq_len: int) -> Frequencies:
    original = _original_length(params, max_position)
    factor = float(params["factor"]) if params.get("factor") is not None else max_position / original
    attention_factor = params.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = params.get("mscale"), params.get("mscale_all_dim")
        if mscale and mscale_all_dim:
            attention_factor = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _yarn_mscale(factor)
    beta_fast = float(params.get("beta_fast") or 32)
    beta_slow = float(params.get("beta_slow") or 1)

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if params.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # HF's guard against a zero-width ramp
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    extrapolation = _default_inv_freq(dim, base)
    interpolation = extrapolation / factor
    inv_freq = interpolation * ramp + extrapolation * (1 - ramp)
    return Frequencies(inv_freq, float(attention_factor))


def _longrope(dim: int, base: float, params: Mapping[str, Any], max_position: int, seq_len: int) -> Frequencies:
    original = _original_length(params, max_position)
    factor = float(params["factor"]) if params.get("factor") is not None else max_position / original
    attention_factor = params.get("attention_factor")
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    ext = params["long_factor"] if seq_len > original else params["short_factor"]
    inv_freq = _default_inv_freq(dim, base) / torch.tensor(ext, dtype=torch.float64)
    return Frequencies(inv_freq, float(attention_factor))


def _llama3(dim: int, base: float, params: Mapping[str, Any], max_position: int, seq_len: int) -> Frequencies:
    factor = float(params["factor"])
    low_freq_factor = float(params["low_freq_factor"])
    high_freq_factor = float(params["high_freq_factor"])
    original = int(params["original_max_position_embeddings"])
    inv_freq = _default_inv_freq(dim, base)
    wavelen = 2 * math.pi / inv_freq
    low_freq_wavelen, high_freq_wavelen = original / low_freq_factor, original / high_freq_factor
    smooth = (original / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    out = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return Frequencies(torch.where(medium, smoothed, out), 1.0)


ROPE_SCALINGS: dict[str, ScalingRule] = {
    "default": ScalingRule(_default, frozenset(), frozenset()),
    "linear": ScalingRule(_linear, frozenset({"factor"}), frozenset()),
    "dynamic": ScalingRule(
        _dynamic, frozenset({"factor"}), frozenset({"original_max_position_embeddings"}), length_dependent=True
    ),
    "yarn": ScalingRule(
        _yarn,
        frozenset({"factor"}),
        frozenset({"original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale",
                   "mscale_all_dim", "truncate"}),
    ),
    "longrope": ScalingRule(
        _longrope,
        frozenset({"short_factor", "long_factor"}),
        frozenset({"factor", "original_max_position_embeddings", "attention_factor"}),
        length_dependent=True,
    ),
    "llama3": ScalingRule(
        _llama3, frozenset({"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}), frozenset()
    ),
}


def scaling_type(scaling: Mapping[str, Any] | None) -> str:
    """The registry name of an HF-style scaling dict (``rope_type``, or the legacy ``type``); None means default."""
    if scaling is None:
        return "default"
    if not isinstance(scaling, Mapping):
        raise TypeError(f"scaling must be a dict like HF rope_scaling or None, got {type(scaling).__name__}")
    name = scaling.get("rope_type", scaling.get("type", "default"))
    if name not in ROPE_SCALINGS:
        raise ValueError(f"unknown RoPE scaling {name!r}: expected one of {', '.join(ROPE_SCALINGS)}")
    return str(name)


def validate_scaling(scaling: Mapping[str, Any] | None, rotary_dim: int) -> str:
    """Check a scaling dict the way HF's rope validation does, raising ValueError; returns its registry name."""
    name = scaling_type(scaling)
    params = dict(scaling or {})
    rule = ROPE_SCALINGS[name]
    missing = sorted(rule.required - params.keys())
    if missing:
        raise ValueError(f"RoPE scaling {name!r} needs {', '.join(missing)}; got keys {sorted(params)}")
    unknown = sorted(params.keys() - rule.required - rule.optional - COMMON_KEYS)
    if unknown:
        raise ValueError(f"RoPE scaling {name!r} does not take {', '.join(unknown)}")
    factor = params.get("factor")
    if factor is not None and (not isinstance(factor, (int, float)) or isinstance(factor, bool) or factor < 1):
        raise ValueError(f"RoPE scaling {name!r}: factor must be a number >= 1, got {factor!r}")
    if name == "llama3" and not params["low_freq_factor"] < params["high_freq_factor"]:
        raise ValueError(
            f"RoPE scaling 'llama3': low_freq_factor ({params['low_freq_factor']}) must be below "
            f"high_freq_factor ({params['high_freq_factor']})"
        )
    if name == "longrope":
        for key in ("short_factor", "long_factor"):
            if len(params[key]) != rotary_dim // 2:
                raise ValueError(
                    f"RoPE scaling 'longrope': {key} has {len(params[key])} entries, expected rotary_dim // 2 = {rotary_dim // 2}"
                )
    if name == "yarn" and float(params.get("beta_fast") or 32) <= float(params.get("beta_slow") or 1):
        raise ValueError("RoPE scaling 'yarn': beta_fast must be larger than beta_slow")
    return name


def rope_frequencies(
    rotary_dim: int,
    base: float,
    scaling: Mapping[str, Any] | None = None,
    *,
    max_position: int,
    seq_len: int | None = None,
) -> Frequencies:
    """Float64 inverse frequencies and attention factor for ``scaling`` (HF ``rope_scaling`` semantics).

    ``max_position`` plays HF's ``max_position_embeddings``; ``seq_len`` (longest position + 1) matters only
    for the length-dependent scalings (dynamic, longrope); None gives their unscaled/short frequencies, as HF
    builds them at init."""
    name = validate_scaling(scaling, rotary_dim)
    rule = ROPE_SCALINGS[name]
    return rule.build(rotary_dim, float(base), dict(scaling or {}), int(max_position), int(seq_len or 0))
