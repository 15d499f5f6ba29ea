"""AMP126 keep-fp32-module-cast: Modules that must stay fp32 (T5 `wo`, declared `_keep_in_fp32_modules`) are cast to half precision.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP126`)."""

from __future__ import annotations

import re
from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, policy_check
from ampdoctor.dtypes import FP16
from ampdoctor.facts import RunFacts
from ampdoctor.policy import Policy

# Checkpoints pretrained in bf16 (overflow when fine-tuned or cast to fp16), T5's `wo` kept fp32 by transformers.
# The T5 family: its transformers classes declare `_keep_in_fp32_modules = ["wo"]`; Gemma, Llama 3 and Qwen declare
# none, so a cast of theirs has no keep-fp32 module to undo.
_T5_FAMILY = "t5|mt5|flan-t5|byt5|ul2|umt5"
_BF16_PRETRAINED = re.compile(rf"(^|[/_-])({_T5_FAMILY}|gemma|llama-3|meta-llama-3|qwen2|qwen3)", re.I)
_KEEPS_FP32 = re.compile(rf"(^|[/_-])({_T5_FAMILY})", re.I)
# Families whose activations are known to leave fp16's range: T5 (hence its keep-fp32 `wo`) and Gemma. Llama 3 and Qwen
# are bf16-pretrained as well, but whether a checkpoint of theirs overflows in fp16 depends on its activation range,
# which no config shows: a note that says so.
_KNOWN_TO_OVERFLOW = re.compile(rf"(^|[/_-])({_T5_FAMILY}|gemma)", re.I)


@policy_check("AMP126")
def keep_fp32_module_cast(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    name = facts.model_name
    if policy is None or not name or not _BF16_PRETRAINED.search(name):
        return
    fp16_weights = FP16 in (policy.params, facts.model_dtype) or facts.engine_precision == "fp16"
    if not (fp16_weights or policy.compute == FP16):
        return
    here = at("compute")
    cast = ""
    if fp16_weights:
        cast = " with its weights cast to fp16" + (" (T5's keep-fp32 `wo` included)" if _KEEPS_FP32.search(name) else "")
    said = f"{name} was pretrained in bf16 and is run in fp16{cast}: activations that exceed fp16's range (65504) "
    if _KNOWN_TO_OVERFLOW.search(name):
        yield Hit(said + "overflow to inf/NaN", here, related=at.others(here, "model_name"))
    else:
        yield Hit(said + "would overflow to inf/NaN; whether this checkpoint's do depends on its activation range, which "
                  "the config cannot show (T5's and Gemma's are known to)", here, severity=Severity.INFO,
                  related=at.others(here, "model_name"))
