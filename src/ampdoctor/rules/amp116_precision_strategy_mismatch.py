"""AMP116 precision-strategy-mismatch: A framework precision string is rejected by, or silently changes meaning under, the chosen strategy.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP116`)."""

from __future__ import annotations

from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, policy_check
from ampdoctor.dtypes import FP16, FP64
from ampdoctor.facts import RunFacts
from ampdoctor.frameworks import lightning, torchtune
from ampdoctor.frameworks.base import as_dtype
from ampdoctor.policy import Policy


@policy_check("AMP116")
def precision_strategy_mismatch(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    framework = (facts.framework or "").split("+")[0]
    if facts.engine_precision == "amp" and facts.zero_stage:
        here = at("engine_precision")
        yield Hit("apex `amp` is enabled with ZeRO: DeepSpeed asserts 'Amp and ZeRO are not currently compatible'",
                  here, related=at.others(here, "zero_stage"))
    if framework in (lightning.NAME, lightning.LITGPT):
        yield from _lightning(facts, at, litgpt=framework == lightning.LITGPT)
    elif framework == "torchtune" and facts.precision_setting is not None:
        yield from _torchtune(facts.precision_setting, facts, at)


def _torchtune(setting: str, facts: RunFacts, at: Places) -> Iterator[Hit]:
    """`training.get_dtype` (torchtune/training/precision.py) looks the string up in `PRECISION_STR_TO_DTYPE` as
    written and raises ValueError for any other spelling, in every recipe; fp16 is refused by the training recipes
    only (`if self._dtype == torch.float16: raise ValueError`), not by generate, eleuther_eval or quantize, and fp64
    passes both checks."""
    if setting not in torchtune.NAMES:
        yield Hit(f"dtype={setting!r} is not a name torchtune's `training.get_dtype` knows ({', '.join(torchtune.NAMES)}, "
                  "written exactly so): the recipe raises ValueError at start-up", at("precision_setting"))
        return
    dtype = as_dtype(setting)
    if dtype in torchtune.DTYPES or dtype == FP64 or (dtype == FP16 and facts.trains is False):
        return
    yield Hit(f"dtype={setting!r}: torchtune recipes train in fp32 or bf16 only (fp16 is refused: "
              "'full fp16 training is not supported')", at("precision_setting"))


def _lightning(facts: RunFacts, at: Places, *, litgpt: bool) -> Iterator[Hit]:
    """What each (precision, strategy) pair really runs (lightning/fabric/plugins/precision)."""
    precision, strategy = facts.precision_setting, facts.strategy
    here = at("precision_setting")
    related = at.others(here, "strategy")
    if precision is None:
        return
    if precision not in lightning.PRECISIONS:
        yield Hit(f"precision={precision!r} is not a Lightning precision (32-true, 16-mixed, bf16-mixed, 16-true, bf16-true, 64-true)", here)
        return
    prefix, _, mode = precision.partition("-")
    half = "fp16" if prefix == "16" else "bf16"
    if strategy == "deepspeed" and mode == "true" and prefix in ("16", "bf16"):  # "32-true" is one it accepts
        yield Hit(f"precision={precision!r} with the DeepSpeed strategy: Lightning 2.0 rejects it ('precision must be one of 32-true, "
                  "16-mixed, bf16-mixed'); later versions run DeepSpeed's half engine with fp32 master weights",
                  here, severity=Severity.WARNING, related=related)
    elif strategy == "deepspeed" and mode == "mixed":
        yield Hit(f"precision={precision!r} with the DeepSpeed strategy is not autocast: DeepSpeed casts the whole model to {half} and "
                  "keeps fp32 master weights in the optimizer (Lightning #18016)", here, severity=Severity.INFO, related=related)
    elif strategy == "fsdp" and mode == "true" and prefix in ("16", "bf16") and not litgpt:
        yield Hit(f"precision={precision!r} with FSDP: FSDPPrecision casts compute and the gradient reduce to {half}, but the sharded "
                  "weights stay fp32 unless the model is created under `trainer.init_module()` (Lightning #18717)",
                  here, severity=Severity.INFO, related=related)
