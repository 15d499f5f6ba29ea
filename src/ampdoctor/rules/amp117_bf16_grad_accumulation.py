"""AMP117 bf16-grad-accumulation: Gradients are accumulated across micro-batches in bf16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP117`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Phase, When
from ampdoctor.audit.names import relpath
from ampdoctor.core.engine import Places
from ampdoctor.core.model import Location, Severity
from ampdoctor.core.registry import Hit, policy_check, runtime_check
from ampdoctor.dtypes import BF16, HALF, name_of
from ampdoctor.facts import RunFacts
from ampdoctor.frameworks import deepspeed
from ampdoctor.policy import Policy

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


@policy_check("AMP117")
def bf16_grad_accumulation_policy(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # DeepSpeed #2768: micro-batch gradients summed in bf16 for weights whose master copy is wider. With bf16
    # weights and no master copy anywhere (torchtune's `dtype: bf16`, Lightning's bf16-true) the accumulation dtype
    # follows the weights by design: a note, not a warning per file. fp16 accumulation under loss scaling is the
    # standard fp16 recipe (Megatron, DeepSpeed's fp16 engine).
    if policy is None or policy.grad_accum != BF16 or facts.trains is False or deepspeed.switched_off(facts, at, "grad_accum"):
        return  # (a legacy `bfloat16` block the launcher switches off: the run accumulates in what it asks; AMP001 says so)
    steps = facts.grad_accum_steps
    here = at("grad_accum")
    pure = _pure_half(policy, facts)
    fix_hint = "set an fp32 accumulation (DeepSpeed `data_types.grad_accum_dtype: fp32`) or fp32 master gradients"
    if steps is not None and steps > 1:
        weights = "pure-bf16 training: the weights are bf16 too" if pure else f"the weights are {policy.params}"
        # Two micro-batches add a single rounding of the sum, the size of the one every bf16 gradient already
        # carries; from three on, the running sum grows past its terms and swallows their low bits at every step.
        few = steps == 2
        said = "; two micro-batches add one rounding, as much as a bf16 gradient already has" if few else ""
        yield Hit(f"gradients of {steps} micro-batches are summed in bf16 (8 significant bits); {weights}{said}: {fix_hint}",
                  here, severity=Severity.INFO if pure or few else None, related=at.others(here, "grad_accum_steps"))
    elif steps is None:
        yield Hit(f"grad_accum=bf16 for {policy.params} weights: if gradients are accumulated over micro-batches, they are summed in bf16; {fix_hint}",
                  here, severity=Severity.INFO)


def _pure_half(policy: Policy, facts: RunFacts) -> bool:
    """Half weights with no fp32 master copy held by the optimizer (DeepSpeed BF16_Optimizer, Megatron)."""
    return policy.params in HALF and facts.master_weights != "optimizer"


@runtime_check("AMP117")
def half_grads_accumulated(ctx: RuntimeContext) -> Iterator[Hit]:
    """Several backward passes summed into bf16 `.grad` before an optimizer step that updates wider master weights."""
    t = ctx.trace
    observed = ctx.observed.policy
    if observed is None:
        return
    pure = _pure_half(observed, ctx.observed.facts)
    for ev in t.optimizer_steps:
        if ev.backward_passes <= 1:
            continue
        # Summed in bf16 only where a bf16 .grad was still there when the next micro-batch began: gradients moved
        # into an fp32 buffer after each backward (Megatron's main_grad) are accumulated in fp32.
        half = sorted({name_of(s.grad_dtype) for s in t.grad_snapshots if s.when == When.BEFORE_MICRO_BATCH and s.grad_dtype == ctx.BF16})
        if half:
            code, line = ev.frame
            yield Hit(f"{ev.backward_passes} backward passes were accumulated into {'/'.join(half)} .grad before {ev.optimizer}.step()"
                      + (" (pure-bf16 training: the weights are bf16 too)" if pure else ""),
                      Location(file=relpath(code.co_filename) if code else None, line=line or None, phase=Phase.OPTIMIZER),
                      severity=Severity.INFO if pure else None, details={"micro_batches": ev.backward_passes})
            return
