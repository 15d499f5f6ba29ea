"""AMP212 half-precision-overflow: an activation or gradient exceeded the largest finite fp16/bf16 value.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP212`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Phase
from ampdoctor.audit.names import module_label
from ampdoctor.core.registry import Hit, runtime_check
from ampdoctor.dtypes import name_of

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext

# inf from log(0) is no overflow (AMP214 names it).
_NOT_OVERFLOW = frozenset({"aten::log", "aten::log_", "aten::log2", "aten::log10", "aten::log1p", "aten::xlogy"})
_LARGEST = {"fp16": 65504.0, "bf16": 3.3895313892515355e38}


@runtime_check("AMP212")
def overflow_in_half(ctx: RuntimeContext) -> Iterator[Hit]:
    flow = ctx.values
    t = ctx.trace
    groups: dict[tuple[int, str], list[int]] = {}
    for origin in flow.origins:
        op = t.op_at(origin.seq)
        out = op.out_dtypes
        if origin.kind != "inf" or not out or out[0] not in ctx.HALF or t.op(origin.seq) in _NOT_OVERFLOW:
            continue
        if op.phase == Phase.BACKWARD and ctx.loss_scaled:
            continue  # the scaler skips this step and lowers its scale: by design
        groups.setdefault((op.module, op.phase), []).append(origin.seq)
    ranges: dict[str, dict] = {}
    for (mod, phase), seqs in groups.items():
        first = seqs[0]
        dt = name_of(t.op_at(first).out_dtypes[0])
        if dt not in ranges:
            ranges[dt] = {(m.module, m.phase): m for m in flow.module_ranges(dt)}
        rng = ranges[dt][(mod, phase)]
        ins = flow.input_stats(first)
        largest = max((s.amax for _, _, s in ins if s is not None), default=0.0)
        module = t.module(mod)
        more = f"; {len(seqs)} ops overflowed there" if len(seqs) > 1 else ""
        yield Hit(
            f"{dt} overflow in the {phase} of {module_label(module)}: {t.op(first)} made inf from finite inputs "
            f"(largest input {largest:.3g}, {dt} ends at {_LARGEST[dt]:.6g}); {rng.fraction(rng.overflow):.1%} of the "
            f"sampled {phase} values of this module are beyond {dt}'s range{more}",
            flow.location(first),
            related=tuple(ctx.operand_location(p, d, f"operand made here (max |x| {s.amax:.3g})") for d, p, s in ins if s is not None),
            details={"dtype": dt, "phase": phase, "module": module, "ops": len(seqs), "input_amax": largest,
                     "overflow_fraction": rng.fraction(rng.overflow)},
        )
