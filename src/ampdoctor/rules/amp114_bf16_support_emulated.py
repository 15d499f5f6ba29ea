"""AMP114 bf16-support-emulated: `torch.cuda.is_bf16_supported()` says True on a GPU that only emulates bf16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP114`)."""

from __future__ import annotations

from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.registry import Hit, policy_check
from ampdoctor.dtypes import BF16
from ampdoctor.facts import RunFacts
from ampdoctor.policy import Policy


@policy_check("AMP114")
def bf16_support_emulated(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # pytorch PR #148322: is_bf16_supported() says True on a T4/V100, where bf16 is emulated. Only a run that
    # asks for bf16 is slowed by it (a launcher file read alone says nothing of the dtype).
    if policy is None or BF16 not in (policy.params, policy.compute):
        return
    bf16_at = at("compute") if policy.compute == BF16 else at("params")
    for device in facts.devices or ():
        if device.emulated_bf16 and not device.native_bf16:
            where = device.location or at("devices")
            yield Hit(f"{device.name}: {device.reason or 'bf16 is emulated'}; torch.cuda.is_bf16_supported() still answers True",
                      where, related=at.others(where, bf16_at))
