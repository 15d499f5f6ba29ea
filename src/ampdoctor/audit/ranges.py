"""The value watch read after the step: value ranges per module and phase, the ops where non-finite values
were made (not merely passed on), and the casts that overflowed or flushed values to zero.

In the optimizer phase only the writes to parameters are measured; the moments and temporaries the update is
computed from count as finite, so that a step that writes inf or NaN into a parameter is the origin.

An op *makes* a NaN when its result has one and none of its inputs had; it makes an inf when its result has one
and every input was finite and no argument was a non-finite scalar (a `masked_fill(-inf)` or `full(-inf)` makes
them on purpose, and the ops that carry such a mask on are not origins either). Inputs are followed through the
views and copies that have no statistics of their own to the op or leaf tensor that made their values; an input
whose values are unknown makes the op no origin, so that an unmeasured op is never blamed.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Any

from ampdoctor import dtypes
from ampdoctor.audit.fields import BACKWARD, CODE, FORWARD, MOD, OPTIMIZER, OUT_DT, PHASE
from ampdoctor.audit.provenance import Trace
from ampdoctor.audit.values import ValueStats
from ampdoctor.core.model import Location
from ampdoctor.report import Table

# The largest finite values of the float dtypes: a mask filled with `finfo(dtype).min` saturates to -inf when
# scores are added to it in half precision, by design (softmax gives 0 either way).
_SENTINELS = frozenset({65504.0, 3.3895313892515355e38, 3.4028234663852886e38, 1.7976931348623157e308})
_UNMEASURED = ValueStats(0.0)  # an optimizer temporary: not measured, counted as finite


@dataclass(frozen=True)
class ModuleRange:
    """The values the ops of one module produced in one phase, against one half dtype (`dtype`)."""

    module: int
    phase: str
    dtype: str  # "fp16" or "bf16": the dtype the counts are for
    ops: int  # ops measured
    amax: float  # the largest finite magnitude
    nonfinite_ops: int  # ops whose result held an inf or NaN
    nan_ops: int  # ops whose result held a NaN
    sampled: int
    zero: int
    flush: int  # nonzero values that round to 0 in `dtype`
    subnormal: int  # fp16 only: values below its normal range (2**-14)
    overflow: int  # values beyond the largest finite `dtype` value, inf included

    def fraction(self, count: int) -> float:
        return count / self.sampled if self.sampled else 0.0


@dataclass(frozen=True)
class Origin:
    """An op that made non-finite values (`kind` "nan" or "inf"), or a leaf tensor that already held NaN."""

    seq: int
    kind: str
    leaf: int | None = None  # id of the leaf tensor the NaN came in with
    exact: bool = True  # False: a result involved was only sampled, the values may have turned earlier


class ValueFlow:
    """The value statistics of a `Trace`, with the walks the value rules need."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        watch = trace.rec.values
        self.watch = watch
        self.stats: dict[int, ValueStats] = watch.stats if watch is not None else {}

    @property
    def enabled(self) -> bool:
        return self.watch is not None

    @property
    def measured(self) -> bool:
        """Some values were measured (none are on fake or meta tensors: the value rules have nothing to read)."""
        return bool(self.stats) or (self.watch is not None and bool(self.watch.leaf_stats))

    # --- inputs ----------------------------------------------------------------------------------

    def input_stats(self, seq: int) -> list[tuple[Any, int, ValueStats | None]]:
        """(dtype, producer, stats) of each float input of op `seq`, through unmeasured views to what made the values."""
        return [(d, p, self.values_of(p, seq)) for d, p in self.trace.float_inputs(seq)]

    def values_of(self, prod: int, seq: int, depth: int = 16) -> ValueStats | None:
        t = self.trace
        while depth > 0:
            if prod < 0:
                return self.watch.leaf_at(-prod, seq) if self.watch is not None else None
            stats = self.stats.get(prod)
            if stats is not None:
                return stats
            if t.records[prod][PHASE] == OPTIMIZER:
                return _UNMEASURED
            ins = t.float_inputs(prod)
            if len(ins) != 1:
                return None
            prod = ins[0][1]
            depth -= 1
        return None

    # --- origins ---------------------------------------------------------------------------------

    @functools.cached_property
    def origins(self) -> list[Origin]:
        """Every op that made non-finite values, in the order they ran (a leaf that came in with NaN: once)."""
        out = []
        leaves: set[int] = set()
        for seq in sorted(s for s, st in self.stats.items() if not st.finite):
            origin = self._origin(seq)
            if origin is not None and origin.leaf not in leaves:
                out.append(origin)
                if origin.leaf is not None:
                    leaves.add(origin.leaf)
        return out

    def _origin(self, seq: int) -> Origin | None:
        st = self.stats[seq]
        ins = self.input_stats(seq)
        if any(s is None for _, _, s in ins):
            return None
        exact = st.exact and all(s.exact for _, _, s in ins)
        if st.has_nan:
            nan_in = [p for _, p, s in ins if s.has_nan]
            if not nan_in:
                return Origin(seq, "nan", exact=exact)
            # NaN is never a mask: an input or parameter that already held it is where it came from.
            return Origin(seq, "nan", -nan_in[0], exact) if all(p < 0 for p in nan_in) else None
        if st.intentional or any(not s.finite or s.amax in _SENTINELS for _, _, s in ins):
            return None
        return Origin(seq, "inf", exact=exact)

    def first_origin(self, skip_backward: bool = False) -> Origin | None:
        for o in self.origins:
            if skip_backward and self.trace.records[o.seq][PHASE] == BACKWARD:
                continue
            return o
        return None

    # --- where -----------------------------------------------------------------------------------

    def forward_of(self, seq: int) -> int | None:
        return self.trace.forward_of(seq)

    def location(self, seq: int, label: str | None = None) -> Location:
        """Where op `seq` ran; a backward op is placed at the forward line that built its node."""
        t = self.trace
        here = t.location(seq, label)
        fwd = self.forward_of(seq) if t.records[seq][PHASE] == BACKWARD else None
        if fwd is None or here.label is not None or t.records[fwd][CODE] is None:
            return here
        return replace(here, label=f"backward of {t.op(fwd)} called here")

    def out_dtype_name(self, seq: int) -> str | None:
        out = self.trace.records[seq][OUT_DT]
        return dtypes.name_of(out[0]) if out else None

    # --- per module ------------------------------------------------------------------------------

    def module_ranges(self, dtype: str) -> list[ModuleRange]:
        """One entry per (module, phase) with measured ops, in the order they first ran."""
        acc: dict[tuple[int, str], list] = {}
        records = self.trace.records
        for seq, st in sorted(self.stats.items()):
            r = records[seq]
            a = acc.setdefault((r[MOD], r[PHASE]), [0, 0.0, 0, 0, 0, 0, 0, 0, 0])
            a[0] += 1
            if st.finite:
                a[1] = max(a[1], st.amax)
            else:
                a[2] += 1
                a[3] += st.has_nan
            a[4] += st.sampled
            a[5] += st.count("zero", dtype)
            a[6] += st.count("flush", dtype)
            a[7] += st.count("subnormal", dtype)
            a[8] += st.count("overflow", dtype)
        return [ModuleRange(mod, phase, dtype, *a) for (mod, phase), a in acc.items()]


def half_of(policy_compute: str) -> str:
    """The half dtype value counts are judged against: the policy's compute dtype when it is half, else fp16
    (the narrower range: what a run would meet in fp16)."""
    return policy_compute if policy_compute in dtypes.HALF else dtypes.FP16


_PHASES = {FORWARD: 0, BACKWARD: 1, OPTIMIZER: 2}


def value_table(flow: ValueFlow, compute: str) -> Table | None:
    """Per module and phase: the largest finite magnitude, ops that made or passed on inf/NaN, and the share of the
    sampled values that overflow or flush to zero in the half dtype the run is judged by."""
    if not flow.stats:
        return None
    dt = half_of(compute)
    names = flow.trace.names
    ranges = sorted(flow.module_ranges(dt), key=lambda m: (names[m.module] or "" if m.module >= 0 else "~", _PHASES.get(m.phase, 3)))
    fp16 = dt == dtypes.FP16
    rows = []
    for m in ranges:
        amax = "nan" if m.nan_ops else ("inf" if m.nonfinite_ops else fmt_amax(m.amax))
        row = [(names[m.module] or "<root>") if m.module >= 0 else "<outside modules>", m.phase, str(m.ops), amax,
               str(m.nonfinite_ops), fmt_fraction(m.fraction(m.overflow)), fmt_fraction(m.fraction(m.flush))]
        if fp16:
            row.append(fmt_fraction(m.fraction(m.subnormal)))
        rows.append(tuple(row + [fmt_fraction(m.fraction(m.zero))]))
    columns = ("module", "phase", "ops", "amax", "non-finite ops", f"overflow {dt}", f"flush to zero {dt}")
    columns += (("subnormal fp16",) if fp16 else ()) + ("zeros",)
    return Table("Per-module value ranges (runtime audit)", columns, tuple(rows))


def fmt_fraction(x: float) -> str:
    if x == 0:
        return "0"
    if x < 0.001:
        return "<0.1%"
    return f"{x * 100:.1f}%"


def fmt_amax(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.3g}"
