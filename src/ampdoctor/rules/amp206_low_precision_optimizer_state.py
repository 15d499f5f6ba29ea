"""AMP206 low-precision-optimizer-state: Optimizer state (Adam moments) is kept in bf16/fp16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP206`)."""

from __future__ import annotations

from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.registry import Hit, policy_check
from ampdoctor.dtypes import HALF
from ampdoctor.facts import RunFacts
from ampdoctor.policy import Policy


@policy_check("AMP206")
def low_precision_optimizer_state(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # With half weights the state's precision is part of the pure-half hazard (AMP119); with fp32 weights it is its own.
    if policy is None or policy.optimizer_state not in HALF or policy.params in HALF or facts.trains is False:
        return
    yield Hit(f"optimizer state is {policy.optimizer_state} while weights are {policy.params}: Adam moments lose small updates",
              at("optimizer_state"))
