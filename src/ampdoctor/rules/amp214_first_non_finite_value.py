"""AMP214 first-non-finite-value: the first op that made an inf or NaN from finite inputs, with its module and line.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP214`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Tag
from ampdoctor.audit.names import module_label
from ampdoctor.core.registry import Hit, runtime_check

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


@runtime_check("AMP214")
def first_non_finite(ctx: RuntimeContext) -> Iterator[Hit]:
    flow = ctx.values
    # Under a dynamic loss scaler an inf gradient is the scaler's signal to skip the step and lower its scale.
    origin = flow.first_origin(skip_backward=ctx.loss_scaled)
    if origin is None:
        return
    t = ctx.trace
    seq = origin.seq
    record = t.op_at(seq)
    op, phase, module = t.op(seq), record.phase, t.module(record.module)
    ins = flow.input_stats(seq)
    if origin.leaf is not None:
        dtype = next(d for d, p, _ in ins if p == -origin.leaf)
        what = (f"first non-finite value: {t.describe(-origin.leaf, dtype)} already held NaN when {op} read it in the "
                f"{phase} of {module_label(module)}")
    else:
        largest = max((s.amax for _, _, s in ins if s is not None), default=0.0)
        made = "NaN" if origin.kind == "nan" else "inf"
        inputs = f" (largest input {largest:.3g})" if ins else ""
        what = f"first non-finite value of the run: {op} made {made} from finite inputs{inputs} in the {phase} of {module_label(module)}"
    if not origin.exact:
        what += " (a result involved was only sampled, so the values may have turned a few ops earlier; "
        what += "`audit(watch_values=\"exact\")` reads every element)"
    related = [ctx.operand_location(p, d, f"operand made here (max |x| {s.amax:.3g})") for d, p, s in ins if s is not None]
    loss = _loss(ctx)
    if loss is not None and loss[1] is not None and not loss[1].finite and loss[0] != seq:
        what += f"; the loss became {'NaN' if loss[1].has_nan else 'inf'}"
        related.append(ctx.operand_location(loss[0], None, "the loss"))
    yield Hit(what, flow.location(seq), related=tuple(related),
              details={"kind": origin.kind, "phase": phase, "module": module, "op": op, "from_input": origin.leaf is not None,
                       "exact": origin.exact})


def _loss(ctx: RuntimeContext) -> tuple[int, object] | None:
    """(producer, stats) of the first loss backward was seeded from."""
    for op in ctx.trace.tagged(Tag.LOSS):
        extra = op.extra
        if extra[1] is not None and extra[1] >= 0:
            return extra[1], ctx.values.values_of(extra[1], op.seq)
    return None
