"""AMP202 fp16-without-loss-scaling: fp16 compute runs without loss scaling.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP202`)."""

from __future__ import annotations

from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.registry import Hit, policy_check
from ampdoctor.dtypes import FP16
from ampdoctor.facts import RunFacts
from ampdoctor.policy import Policy


@policy_check("AMP202")
def fp16_without_loss_scaling(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    if policy is None or policy.compute != FP16 or policy.loss_scale != "none" or facts.trains is False:
        return
    yield Hit("fp16 compute without loss scaling: small gradients underflow to zero", at("compute"))
