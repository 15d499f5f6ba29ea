"""Error metrics of a low-precision tensor against its reference, all computed in float64."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import torch


@dataclass(frozen=True)
class ErrorStats:
    """``rel_l2`` = ||x - ref|| / ||ref||; ``max_abs`` = max |x - ref|; ``sqnr_db`` = 10 log10(||ref||^2 / ||x - ref||^2)
    (inf when x equals ref). ``numel``: how many elements were compared."""

    rel_l2: float
    max_abs: float
    sqnr_db: float
    numel: int

    def to_dict(self) -> dict[str, Any]:
        return {k: _finite_or_text(v) for k, v in self.__dict__.items()}


def _finite_or_text(value: Any) -> Any:
    """JSON has no inf/nan: they are written as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def error_stats(approx: torch.Tensor, reference: torch.Tensor) -> ErrorStats:
    """Errors of `approx` against `reference` (same shape), both read as float64."""
    a = approx.detach().to(torch.float64).reshape(-1)
    r = reference.detach().to(torch.float64).reshape(-1)
    if a.shape != r.shape:
        raise ValueError(f"cannot compare tensors of {a.numel()} and {r.numel()} elements")
    if a.numel() == 0:
        return ErrorStats(0.0, 0.0, math.inf, 0)
    diff = a - r
    err = float(torch.linalg.vector_norm(diff))
    ref = float(torch.linalg.vector_norm(r))
    if err == 0.0:
        rel, sqnr = 0.0, math.inf
    elif ref == 0.0 or not math.isfinite(err):
        rel, sqnr = math.inf, -math.inf
    else:
        rel, sqnr = err / ref, 20.0 * math.log10(ref / err)
    return ErrorStats(rel, float(diff.abs().max()), sqnr, a.numel())


def float_leaves(value: Any) -> Iterator[torch.Tensor]:
    """The floating tensors in a module's inputs or outputs, in a fixed order: tensors, tuples/lists, mappings (HF
    ModelOutput is one) and dataclass-like objects are walked; anything else (caches, ints) is skipped."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from float_leaves(item)
    elif isinstance(value, Mapping):
        for key in value:
            yield from float_leaves(value[key])


def flat(value: Any) -> torch.Tensor | None:
    """All floating leaves of `value` as one float64 vector; None when it has none."""
    leaves = [t.detach().reshape(-1).to(torch.float64) for t in float_leaves(value)]
    return torch.cat(leaves) if leaves else None


def compare_values(approx: Any, reference: Any) -> ErrorStats | None:
    """`error_stats` over all floating leaves; None when either side has none or their sizes differ."""
    a, r = flat(approx), flat(reference)
    if a is None or r is None or a.numel() != r.numel():
        return None
    return error_stats(a, r)
