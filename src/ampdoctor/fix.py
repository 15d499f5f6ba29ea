"""Fixers: rewrite what a model got wrong about precision, in place, and say what changed.

`rope(model)` finds rotary modules of the common shapes -- transformers' ``*RotaryEmbedding`` (``inv_freq``
and ``original_inv_freq`` buffers), GPT-NeoX-style ``cos_cached``/``sin_cached`` tables, plain ``cos``/``sin``
buffers -- and makes their tables exact fp32 (built in float64) and immune to later casts: ``model.to(bf16)``
and DeepSpeed's ``.half()`` go through ``Module._apply``, and a checkpoint load through ``load_state_dict``;
after both the exact tables are put back (transformers #25681, GPT-NeoX #1003, incident 2).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Literal

import torch
from torch import nn

from ampdoctor.core import Finding, Location, finding
from ampdoctor.dtypes import COS_SIN_NAME
from ampdoctor.dtypes import name_of as dtype_name
from ampdoctor.nn.rope_scaling import Frequencies, rope_frequencies
from ampdoctor.nn.rotary import RotaryEmbedding, build_tables, hf_rope_arguments

Width = Literal["single", "cat", "repeat"]

_TABLE_NAME = COS_SIN_NAME
_INV_FREQ_NAMES = ("inv_freq", "original_inv_freq")
_BASE_ATTRS = ("base", "rope_theta", "theta")
_DIM_ATTRS = ("dim", "rotary_dim", "rotary_ndims")
# Relative rounding of each storage dtype: a stored table may differ from the exact one by this much and
# still be the same RoPE; more than that means different frequencies, which we refuse to overwrite.
_ROUNDING = {torch.float64: 1e-12, torch.float32: 2.0**-22, torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}


@dataclass(frozen=True)
class RopeFix:
    """One rotary module made exact: which tensors, their dtypes before, and how far they were off."""

    module: str
    kind: str  # "hf-inv-freq" (transformers *RotaryEmbedding) or "cos-sin-cache"
    tensors: tuple[str, ...]
    dtypes_before: tuple[torch.dtype, ...]
    max_error: float  # max |before - exact| over the rewritten tensors

    @property
    def was_wrong(self) -> bool:
        return any(d != torch.float32 for d in self.dtypes_before) or self.max_error > 1e-6

    def to_finding(self) -> Finding:
        """The rope-cache-low-precision finding this fix resolved, for reports."""
        before = ", ".join(f"{n}={dtype_name(d)}" for n, d in zip(self.tensors, self.dtypes_before))
        return finding(
            "rope-cache-low-precision",
            f"rotary tables {before} were off by up to {self.max_error:.3g}; rebuilt in float64, stored fp32, cast-immune",
            Location(module=self.module),
            details={"tensors": list(self.tensors), "max_error": self.max_error},
        )


@dataclass(frozen=True)
class _Table:
    name: str
    fn: Literal["cos", "sin"]
    shape: tuple[int, ...]
    axis: int  # the positions axis
    width: Width  # last axis: one column per frequency, [f, f] (rotate_half) or [f0, f0, f1, f1, ...]
    scale: float


@dataclass(frozen=True)
class _Recipe:
    """How to recompute a module's exact tensors, kept on the module so casts and loads can restore them."""

    frequencies: Frequencies | None  # fixed frequencies; None for transformers modules (derived from config)
    inv_freq_names: tuple[str, ...]
    tables: tuple[_Table, ...]

    def exact(self, module: nn.Module) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for name in self.inv_freq_names:
            out[name] = _frequencies(module, self, current=name == "inv_freq").inv_freq.to(torch.float32)
        if self.tables:
            frequencies = _frequencies(module, self, current=True)
            length = max(t.shape[t.axis] for t in self.tables)
            cos, sin = build_tables(Frequencies(frequencies.inv_freq, 1.0), length)
            for table in self.tables:
                out[table.name] = _layout_table(cos if table.fn == "cos" else sin, table)
        return out


def _frequencies(module: nn.Module, recipe: _Recipe, current: bool) -> Frequencies:
    if recipe.frequencies is not None:
        return recipe.frequencies
    args = hf_rope_arguments(module.config)
    # transformers' dynamic NTK grows inv_freq to the longest sequence seen; original_inv_freq stays unscaled.
    seq_len = getattr(module, "max_seq_len_cached", 0) if current and getattr(module, "rope_type", "") == "dynamic" else 0
    return rope_frequencies(args["rotary_dim"], args["base"], args["scaling"], max_position=args["max_position"], seq_len=seq_len)


def _layout_table(values: torch.Tensor, table: _Table) -> torch.Tensor:
    length = table.shape[table.axis]
    values = values[:length] * table.scale
    if table.width == "cat":
        values = torch.cat((values, values), dim=-1)
    elif table.width == "repeat":
        values = values.repeat_interleave(2, dim=-1)
    return values.reshape(table.shape).contiguous()


def _tensor_attr(module: nn.Module, name: str) -> torch.Tensor | None:
    value = module._buffers.get(name) if name in module._buffers else module.__dict__.get(name)
    return value if isinstance(value, torch.Tensor) and value.is_floating_point() else None


def _set_tensor(module: nn.Module, name: str, value: torch.Tensor) -> None:
    if name in module._buffers:
        module._buffers[name] = value
    else:
        module.__dict__[name] = value


def _number_attr(module: nn.Module, names: tuple[str, ...]) -> float | None:
    for name in names:
        value = getattr(module, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _source_frequencies(path: str, module: nn.Module) -> Frequencies | None:
    """Exact frequencies from ``base``/``dim`` attributes or a full-precision ``inv_freq``; None for HF modules."""
    config = getattr(module, "config", None)
    if config is not None and hasattr(config, "max_position_embeddings"):
        return None
    base, dim = _number_attr(module, _BASE_ATTRS), _number_attr(module, _DIM_ATTRS)
    if base is not None and dim is not None:
        exponents = torch.arange(0, int(dim), 2, dtype=torch.float64) / int(dim)
        return Frequencies(1.0 / (base**exponents), 1.0)
    inv_freq = _tensor_attr(module, "inv_freq")
    if inv_freq is not None and inv_freq.dtype in (torch.float32, torch.float64):
        # No recipe, but the stored frequencies are full precision: keep them, only harden.
        return Frequencies(inv_freq.detach().to("cpu", torch.float64), 1.0)
    raise ValueError(
        f"rotary module {path or '<root>'} ({type(module).__name__}) has low-precision tables but no way to "
        f"recompute them: give it a base ({'/'.join(_BASE_ATTRS)}) and dim ({'/'.join(_DIM_ATTRS)}) attribute, "
        "a transformers config, or an fp32 inv_freq"
    )


def _check_close(path: str, name: str, stored: torch.Tensor, exact: torch.Tensor, is_table: bool) -> float:
    """Max |stored - exact|, refusing when the two are not the same RoPE up to low-precision storage."""
    stored64, exact64 = stored.detach().to("cpu", torch.float64), exact.to(torch.float64)
    if is_table:
        # A table built in bf16/fp16 drifts with position (GPT-NeoX #1003: 0.78 at 1857); near position 0 any
        # build is within 0.1, while another base or layout is off by O(1).
        head = stored64[tuple(slice(0, 16) if size > 1 else slice(None) for size in stored.shape[:-1])]
        exact_head = exact64[tuple(slice(0, 16) if size > 1 else slice(None) for size in stored.shape[:-1])]
        mismatch = (head - exact_head).abs().max().item() > 0.1
    else:
        mismatch = ((stored64 / exact64 - 1).abs().max().item() > 4 * _ROUNDING.get(stored.dtype, 2.0**-7))
    if mismatch:
        raise ValueError(
            f"rotary module {path or '<root>'}: {name} does not match the RoPE its attributes/config describe "
            f"(beyond {dtype_name(stored.dtype)} rounding), so it was left alone"
        )
    return (stored64 - exact64).abs().max().item()


def _table_spec(path: str, module: nn.Module, name: str, stored: torch.Tensor, frequencies: Frequencies) -> _Table:
    fn = _TABLE_NAME.match(name)["fn"]  # type: ignore[index]
    big = [i for i, size in enumerate(stored.shape[:-1]) if size > 1]
    if stored.dim() < 2 or len(big) != 1:
        raise ValueError(f"rotary module {path or '<root>'}: {name} of shape {tuple(stored.shape)} is not a [positions, ..., dim] table")
    count = frequencies.inv_freq.numel()
    scale = float(getattr(module, "attention_scaling", 1.0) or 1.0)
    widths: dict[int, tuple[Width, ...]] = {count: ("single",), 2 * count: ("cat", "repeat")}
    candidates = widths.get(stored.shape[-1], ())
    if not candidates:
        raise ValueError(f"rotary module {path or '<root>'}: {name} has width {stored.shape[-1]}, expected {count} or {2 * count}")
    cos, sin = build_tables(Frequencies(frequencies.inv_freq, 1.0), min(stored.shape[big[0]], 64))
    probe_shape = list(stored.shape)
    probe_shape[big[0]] = cos.shape[0]
    head = stored.narrow(big[0], 0, cos.shape[0]).detach().to("cpu", torch.float64)

    def distance(width: Width) -> float:
        spec = _Table(name, fn, tuple(probe_shape), big[0], width, scale)
        return (head - _layout_table(cos if fn == "cos" else sin, spec).double()).abs().max().item()

    width = min(candidates, key=distance)
    return _Table(name, fn, tuple(stored.shape), big[0], width, scale)


def _restore(module: nn.Module, fn: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
    recipe: _Recipe = module.__dict__["_ampdoctor_rope_recipe"]
    for name, exact in recipe.exact(module).items():
        device = _tensor_attr(module, name).device  # type: ignore[union-attr]
        if fn is not None and name not in module._buffers:
            # Plain-attribute tables are invisible to _apply: follow the device it moved the buffers to.
            device = fn(torch.empty(0, device=device)).device
        _set_tensor(module, name, exact.to(device))


def _apply_keeping_exact_rope(module: nn.Module, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> nn.Module:
    type(module)._apply(module, fn, recurse)
    _restore(module, fn)
    return module


def _restore_after_load(module: nn.Module, incompatible_keys: Any) -> None:
    _restore(module)


def _harden(module: nn.Module, recipe: _Recipe) -> None:
    first_time = "_ampdoctor_rope_recipe" not in module.__dict__
    module.__dict__["_ampdoctor_rope_recipe"] = recipe
    _restore(module)
    if first_time:
        # Instance-level overrides (partial of module-level functions) survive deepcopy and pickling.
        module.__dict__["_apply"] = functools.partial(_apply_keeping_exact_rope, module)
        module.register_load_state_dict_post_hook(_restore_after_load)


def _fix_module(path: str, module: nn.Module) -> RopeFix | None:
    inv_freq_names = tuple(n for n in _INV_FREQ_NAMES if _tensor_attr(module, n) is not None)
    table_names = sorted(
        n for n in {*module._buffers, *module.__dict__}
        if _TABLE_NAME.match(n) and _tensor_attr(module, n) is not None
    )
    if not inv_freq_names and not table_names:
        return None
    frequencies = _source_frequencies(path, module)
    recipe = _Recipe(frequencies, inv_freq_names, ())
    exact_freqs = frequencies or _frequencies(module, recipe, current=True)
    tables = tuple(_table_spec(path, module, n, _tensor_attr(module, n), exact_freqs) for n in table_names)  # type: ignore[arg-type]
    recipe = _Recipe(frequencies, inv_freq_names, tables)
    exact = recipe.exact(module)
    before = {name: _tensor_attr(module, name) for name in exact}
    errors = [_check_close(path, name, before[name], value, name not in inv_freq_names) for name, value in exact.items()]  # type: ignore[arg-type]
    _harden(module, recipe)
    kind = "hf-inv-freq" if frequencies is None else "cos-sin-cache" if tables else "inv-freq"
    return RopeFix(path, kind, tuple(exact), tuple(t.dtype for t in before.values()), max(errors))  # type: ignore[union-attr]


def rope(model: nn.Module) -> list[RopeFix]:
    """Make every rotary table in ``model`` exact fp32 and cast-immune, in place; one `RopeFix` per module touched.

    Raises ValueError for a rotary module whose tables cannot be recomputed or do not match its own
    description (rather than silently leaving it, or silently changing its frequencies)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"fix.rope expects a torch.nn.Module, got {type(model).__name__}")
    fixes = []
    for path, module in model.named_modules():
        if isinstance(module, RotaryEmbedding):
            continue  # already exact and cast-immune by construction
        fix = _fix_module(path, module)
        if fix is not None:
            fixes.append(fix)
    return fixes
