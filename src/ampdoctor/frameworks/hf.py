"""HF TrainingArguments as JSON/YAML (also TRL/axolotl-style files that add model-loading keys) -> Policy.

- `bf16`/`fp16` turn on autocast; fp16 also a GradScaler (Trainer: `do_grad_scaling = amp_dtype == fp16`);
  both true is refused by TrainingArguments.
- The parameter dtype is whatever the model was loaded in: `torch_dtype`/`dtype` (TRL ModelConfig), fp32 if
  unset. PEFT adapters (`use_peft`, `lora_r`, axolotl `adapter: lora`) are upcast to fp32 by PEFT >= 0.11.
- `deepspeed` (a path or an inline dict): the Trainer fills the DeepSpeed "auto" values from these arguments
  and refuses explicit ones that disagree ("Please correct the following DeepSpeed config values that
  mismatch TrainingArguments values"); the DeepSpeed engine then decides the dtypes.
- `fsdp`: the accelerate FSDP plugin reduces gradients in the mixed-precision dtype.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ampdoctor.frameworks.base import (
    EffectiveConfig,
    PolicyBuilder,
    Reference,
    Setting,
    as_bool,
    as_dtype,
    as_int,
    is_auto,
    lower_str,
    resolve_path,
)
from ampdoctor.frameworks.located import Document
from ampdoctor.policy import Policy, dtype_name
from ampdoctor.rules import Location, finding

NAME = "hf-trainer"

_ARGS = frozenset({
    "output_dir", "per_device_train_batch_size", "per_device_eval_batch_size", "learning_rate", "num_train_epochs",
    "gradient_accumulation_steps", "logging_steps", "save_steps", "eval_strategy", "evaluation_strategy", "save_strategy",
    "lr_scheduler_type", "warmup_ratio", "warmup_steps", "weight_decay", "bf16", "fp16", "deepspeed", "report_to", "optim",
    "gradient_checkpointing", "max_steps", "seed", "tf32", "bf16_full_eval", "fp16_full_eval", "model_name_or_path",
    "torch_dtype", "attn_implementation", "micro_batch_size", "base_model", "flash_attention", "adapter", "fsdp",
    "half_precision_backend", "max_grad_norm", "logging_dir", "overwrite_output_dir", "do_train", "do_eval",
})
_PRECISION_FLAGS = ("bf16", "fp16", "bf16_full_eval", "fp16_full_eval", "tf32", "torch_dtype", "deepspeed", "half_precision_backend")


def detect(doc: Document) -> bool:
    if not isinstance(doc.data, dict):
        return False
    keys = {k for k in doc.data if isinstance(k, str)}
    if any(isinstance(doc.data.get(k), dict) for k in ("bf16", "fp16")):
        return False  # DeepSpeed blocks
    return len(keys & _ARGS) >= 3 and bool(keys & set(_PRECISION_FLAGS) | keys & {"per_device_train_batch_size", "micro_batch_size"})


def _flag(doc: Document, key: str) -> bool | None:
    """A boolean argument; axolotl's `bf16: auto` means "bf16 if the GPU has it": None (unknown)."""
    value = doc.get(key, default=False)
    return None if is_auto(value) else bool(as_bool(value))


def read(doc: Document) -> EffectiveConfig:
    cfg = EffectiveConfig(NAME, doc.file, None, files=(doc.file,))
    bf16, fp16 = _flag(doc, "bf16"), _flag(doc, "fp16")
    bf16_at, fp16_at = doc.at("bf16"), doc.at("fp16")
    if bf16 and fp16:
        later, earlier = (bf16_at, fp16_at) if (bf16_at.line or 0) >= (fp16_at.line or 0) else (fp16_at, bf16_at)
        cfg.findings.append(finding("fp16-bf16-both-enabled",
                                    "both bf16 and fp16 are true: TrainingArguments refuses more than one mixed-precision mode",
                                    later, related=[earlier]))
    model_key = next((k for k in ("torch_dtype", "dtype", "model_dtype") if doc.has(k)), None)
    model_raw = doc.get(model_key) if model_key else None
    model_dtype = as_dtype(model_raw) if model_raw is not None and not is_auto(model_raw) else (None if model_raw is not None else torch.float32)
    model_at = doc.at(model_key) if model_key else Location(file=doc.file, label="torch_dtype unset: fp32")
    if model_dtype is not None:
        cfg.set("model_dtype", model_dtype, model_at, model_key is None)
    adapters = bool(as_bool(doc.get("use_peft", default=False))) or as_int(doc.get("lora_r")) is not None \
        or lower_str(doc.get("adapter")) in ("lora", "qlora") or doc.has("peft_config")
    cfg.set("adapters_only", adapters, doc.at("use_peft") if doc.has("use_peft") else doc.at("adapter") if doc.has("adapter") else doc.at("lora_r"))
    attn = lower_str(doc.get("attn_implementation"))
    if attn:
        cfg.set("attn_implementation", attn, doc.at("attn_implementation"))
    elif as_bool(doc.get("flash_attention")):
        cfg.set("attn_implementation", "flash_attention_2", doc.at("flash_attention"))
    name = doc.get("model_name_or_path") or doc.get("base_model")
    if isinstance(name, str):
        cfg.set("model_name", name, doc.at("model_name_or_path") if doc.has("model_name_or_path") else doc.at("base_model"))
    gas = as_int(doc.get("gradient_accumulation_steps", default=1))
    if gas is not None:
        cfg.set("grad_accum_steps", gas, doc.at("gradient_accumulation_steps"), not doc.has("gradient_accumulation_steps"))
    optim = lower_str(doc.get("optim", default="adamw_torch"))
    cfg.set("optimizer", optim, doc.at("optim"), not doc.has("optim"))
    cfg.set("optimizer_kind", "kahan" if "anyprecision" in optim else "plain", doc.at("optim"), not doc.has("optim"))
    if as_bool(doc.get("tf32")):
        cfg.set("tf32", True, doc.at("tf32"))
    for full_eval, train_flag, train_at in (("fp16_full_eval", bf16, bf16_at), ("bf16_full_eval", fp16, fp16_at)):
        if as_bool(doc.get(full_eval)) and train_flag:
            cfg.findings.append(finding(
                "mixed-half-dtypes",
                f"{full_eval} with {'bf16' if full_eval.startswith('fp16') else 'fp16'} training: evaluation casts the whole "
                f"model to the other half type ({'bf16 weights can overflow fp16' if full_eval.startswith('fp16') else 'fp16-trained weights lose precision in bf16'})",
                doc.at(full_eval), related=[train_at]))

    ds = doc.get("deepspeed")
    if ds:
        fills: dict[tuple[str, ...], tuple[Any, Location]] = {}
        if bf16 is not None:
            fills[("bf16", "enabled")] = (bool(bf16) or bool(as_bool(doc.get("bf16_full_eval"))), bf16_at)
        if fp16 is not None:
            fills[("fp16", "enabled")] = (bool(fp16) or bool(as_bool(doc.get("fp16_full_eval"))), fp16_at)
        if gas is not None:
            fills[("gradient_accumulation_steps",)] = (gas, doc.at("gradient_accumulation_steps"))
        micro = as_int(doc.get("per_device_train_batch_size"))
        if micro is not None:
            fills[("train_micro_batch_size_per_gpu",)] = (micro, doc.at("per_device_train_batch_size"))
        asked = "bf16" if bf16 else "fp16" if fp16 else ("no" if bf16 is not None and fp16 is not None else None)
        precision = Setting(asked, bf16_at if bf16 else fp16_at if fp16 else Location(file=doc.file), not (bf16 or fp16)) if asked else None
        if isinstance(ds, dict):
            cfg.references.append(Reference(Path(doc.file), doc.at("deepspeed"), fills, precision, NAME, inline=doc.sub("deepspeed")))
        else:
            paths = resolve_path(doc.file, str(ds))
            cfg.references.append(Reference(next((p for p in paths if p.is_file()), paths[0]), doc.at("deepspeed"), fills, precision, NAME))
        return cfg

    if bf16 is None or (fp16 is None) or (model_raw is not None and model_dtype is None):
        return cfg  # "auto": decided on the machine, not in the file
    half = torch.bfloat16 if bf16 else torch.float16 if fp16 else None
    half_at = bf16_at if bf16 else fp16_at
    params = torch.float32 if adapters else model_dtype
    b = PolicyBuilder(half_at if half else model_at)
    b.set("params", params, model_at)
    if half is not None:
        b.autocast(cfg, half, half_at)
    else:
        b.set("loss_scale", "none", model_at)  # the Trainer scales the loss only for fp16=true
    for name in ("grads", "grad_accum", "reduce", "optimizer_state"):
        b.set(name, params, model_at)
    fsdp = doc.get("fsdp")
    if fsdp and half is not None:
        b.set("reduce", half, doc.at("fsdp"))
    elif fsdp:
        b.set("reduce", params, doc.at("fsdp"))
    cfg.policy, cfg.sources = b.build()
    return cfg


def export(policy: Policy) -> tuple[dict[str, Any], list[str]]:
    notes: list[str] = []
    config: dict[str, Any] = {"bf16": policy.compute == torch.bfloat16, "fp16": policy.compute == torch.float16}
    if policy.params != torch.float32:
        # A model-loading argument (TRL ModelConfig, from_pretrained), read from the same file by TRL scripts.
        config["torch_dtype"] = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float64: "float64"}[policy.params]
    if policy.compute == policy.params and policy.compute != torch.float32 and policy.compute in (torch.bfloat16, torch.float16):
        config["bf16" if policy.compute == torch.bfloat16 else "fp16"] = False  # a cast model needs no autocast
    for name in ("grads", "grad_accum", "reduce", "optimizer_state"):
        if getattr(policy, name) != policy.params:
            notes.append(f"{name}={dtype_name(getattr(policy, name))}: under the Trainer (DDP) it follows the parameter dtype ({dtype_name(policy.params)})")
    expected_scale = "dynamic" if config["fp16"] else "none"
    if policy.loss_scale != expected_scale:
        notes.append(f"loss_scale={policy.loss_scale}: the Trainer uses a dynamic GradScaler exactly when fp16=true")
    if policy.compute not in (torch.bfloat16, torch.float16, policy.params):
        notes.append(f"compute={dtype_name(policy.compute)}: the Trainer autocasts to bf16 or fp16 only")
    return config, notes
