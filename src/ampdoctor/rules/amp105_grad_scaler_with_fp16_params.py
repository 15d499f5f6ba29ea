"""AMP105 grad-scaler-with-fp16-params: A GradScaler unscales gradients of parameters that are themselves fp16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP105`)."""

from __future__ import annotations

from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.registry import Hit, policy_check
from ampdoctor.dtypes import FP16
from ampdoctor.facts import RunFacts
from ampdoctor.policy import Policy


@policy_check("AMP105")
def grad_scaler_with_fp16_params(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # GradScaler.unscale_ refuses fp16 gradients ("Attempting to unscale FP16 gradients.").
    if policy is None or policy.loss_scale == "none" or policy.grads != FP16 or facts.adapters_only or facts.trains is False:
        return
    here = at("loss_scale")
    yield Hit("a GradScaler unscales gradients of fp16 weights: 'ValueError: Attempting to unscale FP16 gradients.'",
              here, related=at.others(here, "params"))
