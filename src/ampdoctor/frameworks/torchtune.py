"""torchtune recipe YAML (`dtype`, `_component_` entries) -> Policy.

torchtune has no autocast mode: `dtype: bf16` loads and trains the model in bf16 (weights, gradients,
their accumulation and all-reduce, and the optimizer state that follows the weights); `dtype: fp32` keeps
everything fp32; the recipes refuse fp16 ("full fp16 training is not supported with this recipe").
"""

from __future__ import annotations

from typing import Any

import torch

from ampdoctor.frameworks.base import EffectiveConfig, PolicyBuilder, as_bool, as_dtype, as_int, lower_str
from ampdoctor.frameworks.located import Document, iter_leaves
from ampdoctor.policy import Policy, dtype_name
from ampdoctor.rules import finding

NAME = "torchtune"


def detect(doc: Document) -> bool:
    if not isinstance(doc.data, dict):
        return False
    components = [v for path, v in iter_leaves(doc) if path and path[-1] == "_component_" and isinstance(v, str)]
    return any(c.startswith("torchtune.") for c in components) or (bool(components) and "dtype" in doc.data)


def read(doc: Document) -> EffectiveConfig:
    cfg = EffectiveConfig(NAME, doc.file, None, files=(doc.file,))
    raw = doc.get("dtype", default="fp32")
    at = doc.at("dtype")
    dtype = as_dtype(raw)
    if dtype == torch.float16 or dtype is None:
        cfg.findings.append(finding(
            "precision-strategy-mismatch",
            f"dtype={raw!r}: torchtune recipes train in fp32 or bf16 only (fp16 is refused: 'full fp16 training is not supported')",
            at))
        return cfg
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
    device = lower_str(doc.get("device", default="cuda"))
    cfg.set("device", device, doc.at("device"), not doc.has("device"))
    b = PolicyBuilder(at)
    for name in ("params", "compute", "grads", "grad_accum", "reduce"):
        b.set(name, dtype, at)
    b.set("optimizer_state", dtype if kind == "plain" else torch.float32, doc.at("optimizer") if doc.has("optimizer") else at)
    b.set("loss_scale", "none", at)
    cfg.policy, cfg.sources = b.build()
    return cfg


def export(policy: Policy) -> tuple[dict[str, Any], list[str]]:
    notes: list[str] = []
    dtype = "bf16" if torch.bfloat16 in (policy.params, policy.compute) else "fp32"
    target = torch.bfloat16 if dtype == "bf16" else torch.float32
    if policy.compute == torch.float16 or policy.params == torch.float16:
        notes.append("fp16: torchtune recipes refuse fp16 training")
    for name in ("params", "compute", "grads", "grad_accum", "reduce"):
        if getattr(policy, name) != target:
            notes.append(f"{name}={dtype_name(getattr(policy, name))}: torchtune has no mixed mode; dtype: {dtype} makes it {dtype_name(target)}")
    config: dict[str, Any] = {"dtype": dtype}
    if dtype == "bf16" and policy.optimizer_state == torch.float32:
        # torchao's AdamW with stochastic rounding: bf16 weights whose updates are not lost.
        config["optimizer"] = {"_component_": "torchao.optim.AdamW", "bf16_stochastic_round": True}
    elif policy.optimizer_state != target:
        notes.append(f"optimizer_state={dtype_name(policy.optimizer_state)}: the optimizer state follows dtype ({dtype_name(target)})")
    if policy.loss_scale != "none":
        notes.append(f"loss_scale={policy.loss_scale}: torchtune has no loss scaling")
    return config, notes
