"""AMP117 bf16-grad-accumulation: Gradients are accumulated across micro-batches in bf16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP117`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.fields import OPTIMIZER
from ampdoctor.audit.names import relpath
from ampdoctor.dtypes import HALF, name_of
from ampdoctor.facts import RunFacts
from ampdoctor.policy import Policy
from ampdoctor.rules.engine import Places
from ampdoctor.rules.model import Location, Severity
from ampdoctor.rules.registry import Hit, policy_check, runtime_check

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


@policy_check("AMP117")
def bf16_grad_accumulation_policy(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # B17 (DeepSpeed #2768): micro-batch gradients summed in half precision.
    if policy is None or policy.grad_accum not in HALF or facts.trains is False:
        return
    steps = facts.grad_accum_steps
    here = at("grad_accum")
    fix_hint = "set an fp32 accumulation (DeepSpeed `data_types.grad_accum_dtype: fp32`) or fp32 master gradients"
    if steps is not None and steps > 1:
        yield Hit(f"gradients of {steps} micro-batches are summed in {policy.grad_accum} (8 significant bits in bf16): {fix_hint}",
                  here, related=at.others(here, "grad_accum_steps"))
    elif steps is None:
        yield Hit(f"grad_accum={policy.grad_accum}: if gradients are accumulated over micro-batches, they are summed in half precision; {fix_hint}",
                  here, severity=Severity.INFO)


@runtime_check("AMP117")
def half_grads_accumulated(ctx: RuntimeContext) -> Iterator[Hit]:
    """Several backward passes summed into half-precision `.grad` before an optimizer step."""
    t = ctx.trace
    for ev in t.rec.opt_events:
        if ev["backward_passes"] <= 1:
            continue
        half = sorted({name_of(g) for w, _, _, g, _ in t.rec.grad_events if w == "optimizer step" and g in ctx.HALF})
        if half:
            code, line = ev["frame"]
            yield Hit(f"{ev['backward_passes']} backward passes were accumulated into {'/'.join(half)} .grad before {ev['optimizer']}.step()",
                      Location(file=relpath(code.co_filename) if code else None, line=line or None, phase=OPTIMIZER),
                      details={"micro_batches": ev["backward_passes"]})
            return
