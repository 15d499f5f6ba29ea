"""AMP115 fp16-bf16-both-enabled: A DeepSpeed config enables both fp16 and bf16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP115`)."""

from __future__ import annotations

from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.registry import Hit, policy_check
from ampdoctor.facts import RunFacts
from ampdoctor.policy import Policy

# What each framework does when both half types are switched on.
_REFUSAL = {
    "deepspeed": "DeepSpeed stops with 'bfloat16 and fp16 modes cannot be simultaneously enabled'",
    "gpt-neox": "DeepSpeed stops with 'bfloat16 and fp16 modes cannot be simultaneously enabled'",
    "hf-trainer": "TrainingArguments refuses more than one mixed-precision mode",
}


@policy_check("AMP115")
def fp16_bf16_both_enabled(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    modes = facts.half_modes_enabled or ()
    if not {"fp16", "bf16"} <= set(modes):
        return
    fp16_at, bf16_at = at("fp16_mode"), at("bf16_mode")
    later, earlier = (bf16_at, fp16_at) if (bf16_at.line or 0) >= (fp16_at.line or 0) else (fp16_at, bf16_at)
    refusal = _REFUSAL.get((facts.framework or "").split("+")[-1], "the framework refuses it")
    yield Hit(f"both fp16 and bf16 are enabled: {refusal}", later, related=at.others(later, earlier))
