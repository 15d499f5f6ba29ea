"""AMP213 gradient-underflow: gradients are flushed to zero when cast to fp16/bf16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP213`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Phase
from ampdoctor.audit.names import module_label
from ampdoctor.core.registry import Hit, runtime_check
from ampdoctor.dtypes import name_of

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext

# A cast is reported when the gradient values it zeroes carry at least this share of the gradient's squared L2
# norm (its mass). Counting values instead would report fp32 denormals that bf16 flushes, which weigh nothing.
MIN_LOST_MASS = 1e-3
_FLOOR = {"fp16": 2.0**-25, "bf16": 2.0**-134}


@runtime_check("AMP213")
def gradients_flushed_to_zero(ctx: RuntimeContext) -> Iterator[Hit]:
    flow = ctx.values
    if not flow.measured:
        return
    t = ctx.trace
    seen: set[int] = set()
    for op in t.ops():
        out = op.out_dtypes
        if op.phase != Phase.BACKWARD or not out or out[0] not in ctx.HALF or op.module in seen:
            continue
        dt = name_of(out[0])
        for d, p, s in flow.input_stats(op.seq):
            if d in ctx.HALF or s is None or not s.sampled:
                continue
            nonzero = s.sampled - s.count("zero", dt)
            flushed = s.count("flush", dt)
            lost = s.lost_mass(dt)
            if not nonzero or not flushed or lost is None or lost < MIN_LOST_MASS:
                continue
            seen.add(op.module)
            module = t.module(op.module)
            scaled = "" if ctx.loss_scaled else ", and no loss scaler ran"
            yield Hit(
                f"{lost:.1%} of the {name_of(d)} gradient's L2 mass ({flushed / nonzero:.1%} of its nonzero values) cast to {dt} "
                f"by {t.op(op.seq)} in the backward of {module_label(module)} is in values of at most {_FLOOR[dt]:.3g}, "
                f"which flush to zero{scaled}",
                flow.location(op.seq),
                related=(ctx.operand_location(p, d, f"gradient made here (max |g| {s.amax:.3g})"),),
                details={"dtype": dt, "module": module, "flushed_fraction": flushed / nonzero, "lost_mass": lost, "sampled": s.sampled,
                         "loss_scaled": ctx.loss_scaled},
            )
            break


# A nonzero half gradient whose largest value is below this is near the bottom of bf16's range (2**-133): its products
# with weights of ordinary size flush to zero (2**-100 is far below any gradient a sound step makes).
TINY_GRADIENT = 2.0**-100


@runtime_check("AMP213")
def gradient_products_flushed_to_zero(ctx: RuntimeContext) -> Iterator[Hit]:
    """The cast can keep the few largest values of a tiny gradient (most of its mass) and still hand on a gradient
    so small that the next half-precision matmul of the backward makes nothing but zeros of it: every gradient
    below that point is lost. Reported at the first such matmul: its output sampled all zero, from a nonzero
    half gradient operand whose largest value is below `TINY_GRADIENT`."""
    flow = ctx.values
    if not flow.measured:
        return
    t = ctx.trace
    for op in t.ops(Phase.BACKWARD):
        out = op.out_dtypes
        if not out or out[0] not in ctx.HALF or op.func_id not in ctx.matmul_ops:
            continue
        dt = name_of(out[0])
        made = flow.stats.get(op.seq)
        if made is None or not made.sampled or made.amax != 0:
            continue
        tiny = [(d, p, s) for d, p, s in flow.input_stats(op.seq)
                if d in ctx.HALF and s is not None and s.finite and 0 < s.amax < TINY_GRADIENT]
        if not tiny:
            continue
        d, p, s = tiny[0]
        module = t.module(op.module)
        scaled = "" if ctx.loss_scaled else ", and no loss scaler ran"
        yield Hit(f"{t.op(op.seq)} in the backward of {module_label(module)} makes an all-zero {dt} gradient of a nonzero one "
                  f"(largest |g| {s.amax:.3g}): its products are below {_FLOOR[dt]:.3g} and flush to zero, and so is every "
                  f"gradient computed from it{scaled}",
                  flow.location(op.seq),
                  related=(ctx.operand_location(p, d, f"gradient made here (max |g| {s.amax:.3g})"),),
                  details={"dtype": dt, "module": module, "max_gradient": s.amax, "loss_scaled": ctx.loss_scaled})
        return
