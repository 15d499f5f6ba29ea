"""H2O LLM Studio experiment YAML (`architecture.backbone_dtype`, `environment.mixed_precision[_dtype]`) -> Policy.

train.py builds `GradScaler(enabled=mixed_precision_dtype == "float16")` and autocasts to
`mixed_precision_dtype` when `mixed_precision` is on. Versions before `mixed_precision_dtype` existed (#672)
always autocast to fp16 and always built the GradScaler, so a bf16 backbone with `mixed_precision: true`
ran GradScaler on bf16 gradients (incident 4, h2oai/h2o-llmstudio #628:
'"_amp_foreach_non_finite_check_and_unscale_cuda" not implemented for 'BFloat16'').
"""

from __future__ import annotations

from ampdoctor.dtypes import FP16, FP32
from ampdoctor.frameworks.base import PolicyBuilder, Reading, as_bool, as_dtype, as_int, lower_str
from ampdoctor.frameworks.located import Document
from ampdoctor.frameworks.reader import Reader

NAME = "h2o-llmstudio"


def detect(doc: Document) -> bool:
    if not isinstance(doc.data, dict):
        return False
    sections = {k for k in ("architecture", "environment", "training", "dataset", "tokenizer", "prediction") if isinstance(doc.data.get(k), dict)}
    return len(sections) >= 2 and ("backbone_dtype" in doc.get("architecture", default={}) or
                                   "mixed_precision" in doc.get("environment", default={}) or
                                   "llm_backbone" in doc.data or "problem_type" in doc.data)


def read(doc: Document) -> Reading:
    cfg = Reading(NAME, doc.file)
    backbone_raw = doc.get("architecture", "backbone_dtype", default="float16")
    backbone_at = doc.at("architecture", "backbone_dtype")
    quantized = lower_str(backbone_raw) in ("int8", "int4")
    backbone = FP16 if quantized else (as_dtype(backbone_raw) or FP32)
    cfg.set("model_dtype", backbone, backbone_at, not doc.has("architecture", "backbone_dtype"))
    lora = bool(as_bool(doc.get("training", "lora", default=False)))
    cfg.set("adapters_only", lora, doc.at("training", "lora"))
    mixed = bool(as_bool(doc.get("environment", "mixed_precision", default=False)))
    mixed_at = doc.at("environment", "mixed_precision")
    has_dtype = doc.has("environment", "mixed_precision_dtype")
    amp = as_dtype(doc.get("environment", "mixed_precision_dtype")) if has_dtype else FP16
    amp_at = doc.at("environment", "mixed_precision_dtype") if has_dtype else mixed_at
    gas = as_int(doc.get("training", "grad_accumulation", default=1)) or 1
    cfg.set("grad_accum_steps", gas, doc.at("training", "grad_accumulation"), not doc.has("training", "grad_accumulation"))
    gpus = doc.get("environment", "gpus")
    if isinstance(gpus, (list, tuple)) and gpus:
        cfg.set("world_size", len(gpus), doc.at("environment", "gpus"))
    optimizer = lower_str(doc.get("training", "optimizer", default="AdamW"))
    cfg.set("optimizer_kind", "plain", doc.at("training", "optimizer"), not doc.has("training", "optimizer"))
    b = PolicyBuilder(backbone_at)
    params = FP32 if (lora and quantized) else backbone
    b.set("params", params, backbone_at)
    cfg.set("autocast", bool(mixed and amp is not None), amp_at if mixed else mixed_at)
    if mixed and amp is not None:
        b.set("compute", amp, amp_at)
        if amp == FP16:
            # Without mixed_precision_dtype (older versions) the scaler is always built; with it, only for float16.
            b.set("loss_scale", "dynamic", amp_at)
            cfg.set("loss_scaler_reason", "no mixed_precision_dtype: GradScaler is always built" if not has_dtype else "mixed_precision_dtype: float16", amp_at)
    if "loss_scale" not in b.given:
        b.set("loss_scale", "none", mixed_at)
    for name in ("grads", "grad_accum", "reduce"):
        b.set(name, params, backbone_at)
    b.set("optimizer_state", params, doc.at("training", "optimizer") if optimizer else backbone_at)
    cfg.policy, cfg.sources = b.build()
    return cfg


READER = Reader(NAME, detect, read, key="h2o")
