"""AMP214 first-non-finite-value: the first op that made an inf or NaN from finite inputs, with its module and line.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP214`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Tag
from ampdoctor.audit.names import module_label
from ampdoctor.core.model import Severity
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
    reached_loss = loss is not None and loss[1] is not None and not loss[1].finite
    if reached_loss and loss[0] != seq:
        what += f"; the loss became {'NaN' if loss[1].has_nan else 'inf'}"
        related.append(ctx.operand_location(loss[0], None, "the loss"))
    severity = None
    discarded = None if reached_loss or origin.leaf is not None else _discarded(ctx, seq)
    if discarded:
        # A value every reader turns back into finite ones (`where`, `masked_fill`, `clamp`, `nan_to_num`) reaches no
        # loss, gradient or weight: worth knowing, not a failure.
        what += f"; it is discarded: every op that reads it ({discarded}) gives finite values, so nothing downstream sees it"
        severity = Severity.INFO
    yield Hit(what, flow.location(seq), related=tuple(related), severity=severity,
              details={"kind": origin.kind, "phase": phase, "module": module, "op": op, "from_input": origin.leaf is not None,
                       "exact": origin.exact, "discarded": bool(discarded)})


def _discarded(ctx: RuntimeContext, seq: int) -> str | None:
    """The ops that turned the non-finite values of op `seq` back into finite ones, when every path from it ends at
    one (it is carried on by ops that keep it non-finite, `log(0) * 2 + 4`, up to a `where` that drops it); None when
    a path ends non-finite, or leads nowhere the audit saw."""
    readers: dict[int, list[int]] = {}
    for op in ctx.trace.ops():
        for p in op.producers:
            if p is not None and p >= seq:
                readers.setdefault(p, []).append(op.seq)
    stats = ctx.values.stats
    todo, seen, ends = [seq], {seq}, set()
    while todo:
        here = todo.pop()
        nxt = readers.get(here)
        if not nxt or len(seen) > 256:
            return None  # non-finite with nobody reading it that the audit saw (a returned value, a loss)
        for r in nxt:
            st = stats.get(r)
            if st is None:
                return None
            if st.finite:
                ends.add(ctx.trace.op(r))
            elif r not in seen:
                seen.add(r)
                todo.append(r)
    return ", ".join(sorted(ends)[:3]) if ends else None


def _loss(ctx: RuntimeContext) -> tuple[int, object] | None:
    """(producer, stats) of the first loss backward was seeded from."""
    for op in ctx.trace.tagged(Tag.LOSS):
        extra = op.extra
        if extra[1] is not None and extra[1] >= 0:
            return extra[1], ctx.values.values_of(extra[1], op.seq)
    return None
