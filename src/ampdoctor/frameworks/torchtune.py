"""torchtune recipe YAML (`dtype`, `_component_` entries) -> Policy.

torchtune has no autocast mode: `dtype: bf16` loads and trains the model in bf16 (weights, gradients,
their accumulation and all-reduce, and the optimizer state that follows the weights); `dtype: fp32` keeps
everything fp32; the recipes refuse fp16 ("full fp16 training is not supported with this recipe").
"""

from __future__ import annotations

from typing import Any

from ampdoctor.core.model import Location
from ampdoctor.dtypes import BF16, FP16, FP32
from ampdoctor.frameworks.base import PolicyBuilder, Reading, as_bool, as_dtype, as_int, lower_str
from ampdoctor.frameworks.located import Document, iter_leaves
from ampdoctor.frameworks.reader import Reader
from ampdoctor.policy import Policy

NAME = "torchtune"
# The dtypes torchtune recipes train in (`training.get_dtype`: fp16 is refused).
DTYPES = frozenset({FP32, BF16})
# The only spellings `training.get_dtype` accepts (the keys of `training/precision.py` `PRECISION_STR_TO_DTYPE`,
# looked up exactly: "bfloat16", "float32" or "BF16" are not keys and raise "Dtype ... must be one of ...").
NAMES = ("fp16", "bf16", "fp32", "fp64")


def detect(doc: Document) -> bool:
    if not isinstance(doc.data, dict):
        return False
    components = [v for path, v in iter_leaves(doc) if path and path[-1] == "_component_" and isinstance(v, str)]
    return any(c.startswith("torchtune.") for c in components) or (bool(components) and "dtype" in doc.data)


def read(doc: Document) -> Reading:
    cfg = Reading(NAME, doc.file)
    raw = doc.get("dtype", default="fp32")
    raw = "fp32" if raw is None else raw  # `get_dtype(None)` is float32
    at = doc.at("dtype")
    dtype = as_dtype(raw) if raw in NAMES else None  # any other spelling is refused at start-up (AMP116)
    cfg.set("precision_setting", str(raw), at, not doc.has("dtype"))
    if not doc.has("optimizer"):
        # evaluation, generation and quantization configs build no optimizer: nothing trains
        cfg.set("trains", False, at)
    if dtype not in DTYPES:
        return cfg  # the training recipes refuse it; the rules say so
    if "single_device" in doc.file.rsplit("/", 1)[-1]:
        cfg.set("world_size", 1, Location(file=doc.file, label="a single-device recipe config"))
    gas = as_int(doc.get("gradient_accumulation_steps", default=1)) or 1
    cfg.set("grad_accum_steps", gas, doc.at("gradient_accumulation_steps"), not doc.has("gradient_accumulation_steps"))
    model = lower_str(doc.get("model", "_component_"))
    cfg.set("adapters_only", "lora" in model or "dora" in model, doc.at("model", "_component_"))
    optimizer = doc.get("optimizer", default={})
    component = lower_str(optimizer.get("_component_")) if isinstance(optimizer, dict) else ""
    kind = "plain"
    if isinstance(optimizer, dict) and (as_bool(optimizer.get("bf16_stochastic_round")) or "kahan" in component
                                        or as_bool(optimizer.get("use_kahan_summation"))):
        kind = "stochastic-rounding"
    cfg.set("optimizer", component, doc.at("optimizer", "_component_"), not component)
    cfg.set("optimizer_kind", kind, doc.at("optimizer", "_component_"), not component)
    cfg.set("autocast", False, at)  # torchtune has no autocast mode: dtype is the weights' dtype
    b = PolicyBuilder(at)
    for name in ("params", "compute", "grads", "grad_accum", "reduce"):
        b.set(name, dtype, at)
    b.set("optimizer_state", dtype if kind == "plain" else FP32, doc.at("optimizer") if doc.has("optimizer") else at)
    b.set("loss_scale", "none", at)
    cfg.policy, cfg.sources = b.build()
    return cfg


def export(policy: Policy) -> tuple[dict[str, Any], list[str]]:
    notes: list[str] = []
    dtype = "bf16" if BF16 in (policy.params, policy.compute) else "fp32"
    target = BF16 if dtype == "bf16" else FP32
    if policy.compute == FP16 or policy.params == FP16:
        notes.append("fp16: torchtune recipes refuse fp16 training")
    for name in ("params", "compute", "grads", "grad_accum", "reduce"):
        if getattr(policy, name) != target:
            notes.append(f"{name}={getattr(policy, name)}: torchtune has no mixed mode; dtype: {dtype} makes it {target}")
    config: dict[str, Any] = {"dtype": dtype}
    if dtype == "bf16" and policy.optimizer_state == FP32:
        # torchao's AdamW with stochastic rounding: bf16 weights whose updates are not lost.
        config["optimizer"] = {"_component_": "torchao.optim.AdamW", "bf16_stochastic_round": True}
    elif policy.optimizer_state != target:
        notes.append(f"optimizer_state={policy.optimizer_state}: the optimizer state follows dtype ({target})")
    if policy.loss_scale != "none":
        notes.append(f"loss_scale={policy.loss_scale}: torchtune has no loss scaling")
    return config, notes


READER = Reader(NAME, detect, read, export=export)
