"""AMP128 mixed-precision-without-master-weights: Autocast mixed precision is on, but the trainable parameters are already bf16, so there is no fp32 master copy.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP128`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.registry import Hit, policy_check, runtime_check
from ampdoctor.facts import RunFacts, half_weights_without_master
from ampdoctor.policy import Policy

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


@policy_check("AMP128")
def mixed_precision_without_master_weights(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # litgpt #1252: "mixed precision" over weights that are already half: no fp32 master copy.
    if not half_weights_without_master(policy, facts) or not facts.autocast:
        return
    assert policy is not None
    here = at("autocast")
    yield Hit(f"mixed precision is on ({policy.compute} autocast) but the trainable weights are already {policy.params}: "
              "there is no fp32 master copy, so small updates round away", here, related=at.others(here, "params"))


@runtime_check("AMP128")
def autocast_over_half_weights_lost_updates(ctx: RuntimeContext) -> Iterator[Hit]:
    """Autocast ran over half-precision weights and the optimizer step measurably lost updates."""
    facts, observed = ctx.observed.facts, ctx.observed.policy
    if not facts.autocast or observed is None or not half_weights_without_master(observed, facts):
        return
    for share, where, details in ctx.rounded_updates():
        yield Hit(f"mixed precision is on ({observed.compute} autocast) but the trainable weights are already {observed.params}: "
                  f"{share:.1%} of their elements with a non-zero gradient did not change in {details['optimizer']}.step() "
                  "(updates below half an ulp round away)", where, details=details)
