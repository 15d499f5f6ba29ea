"""AMP120 optimizer-dtype-mismatch: The optimizer expects a different parameter, gradient or state dtype than it is given.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP120`)."""

from __future__ import annotations

from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.registry import Hit, policy_check
from ampdoctor.facts import RunFacts
from ampdoctor.policy import Policy


@policy_check("AMP120")
def optimizer_dtype_mismatch(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # SimpleTuner #755: an optimizer that insists on one parameter dtype.
    required = facts.optimizer_requires
    if policy is None or required is None or policy.params == required:
        return
    here = at("optimizer")
    yield Hit(f"optimizer {facts.optimizer!r} needs {required} weights but they are {policy.params} ('AssertionError: only bfloat 16 is supported.')",
              here, related=at.others(here, "params"))
