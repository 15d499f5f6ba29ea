"""AMP112 flash-attention-fp32-model: `attn_implementation="flash_attention_2"` is requested for a model loaded in fp32.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP112`)."""

from __future__ import annotations

from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, policy_check
from ampdoctor.dtypes import HALF, WIDE
from ampdoctor.facts import RunFacts
from ampdoctor.policy import Policy


@policy_check("AMP112")
def flash_attention_fp32_model(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # transformers #28052: FlashAttention-2 with a model loaded in fp32.
    attn = facts.attn_implementation or ""
    if not attn.startswith("flash_attention") or facts.model_dtype not in WIDE:
        return
    half_compute = policy is not None and policy.compute in HALF
    here = at("attn_implementation")
    yield Hit(f"attn_implementation={attn} with the model loaded in {facts.model_dtype}"
              + (f": it only runs because {policy.compute} autocast casts q/k/v; transformers still warns" if half_compute and policy else
                 ": FlashAttention supports only fp16/bf16 inputs ('Flash Attention 2.0 only supports torch.float16 and torch.bfloat16 dtypes')"),
              here, severity=Severity.INFO if half_compute else None, related=at.others(here, "model_dtype"))
