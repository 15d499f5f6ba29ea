"""Lightning config YAML (LightningCLI `trainer:` section; litgpt's top-level `precision`/`devices`) -> Policy.

What each (precision, strategy) pair really runs (lightning/fabric/plugins/precision/{amp,half,fsdp,deepspeed}.py):
- DDP/single device: `*-mixed` is autocast over fp32 weights (16-mixed adds a GradScaler); `*-true` casts the
  whole module, so gradients, their accumulation, the all-reduce and Adam's state are half too.
- FSDP: `FSDPPrecision` sets `MixedPrecision(param_dtype, reduce_dtype=buffer_dtype=half)` for every half
  precision, so gradients are reduced in bf16/fp16 (fp32 reduce cannot be expressed); with `bf16-true` the
  weights stay fp32 unless the model is built under `trainer.init_module()` (Lightning #18717).
- DeepSpeed: `16-mixed`/`bf16-mixed` run DeepSpeed's fp16/bf16 engines, i.e. the model is cast to half
  (Lightning #18016); Lightning 2.0 rejected `*-true` ("`precision='bf16-true')` is not supported in DeepSpeed",
  litgpt #116).
"""

from __future__ import annotations

from typing import Any

import torch

from ampdoctor.frameworks import deepspeed
from ampdoctor.frameworks.base import EffectiveConfig, PolicyBuilder, Reference, Setting, as_int, lower_str, resolve_path
from ampdoctor.frameworks.located import Document, KeyPath
from ampdoctor.policy import Policy, dtype_name
from ampdoctor.rules import Location, finding

NAME = "lightning"

_TRAINER_KEYS = frozenset({"precision", "strategy", "devices", "accelerator", "max_epochs", "max_steps", "num_nodes",
                           "accumulate_grad_batches", "callbacks", "logger", "gradient_clip_val", "log_every_n_steps",
                           "val_check_interval", "plugins", "default_root_dir", "enable_checkpointing"})
_ALIASES = {"16": "16-mixed", "16-mixed": "16-mixed", "bf16": "bf16-mixed", "bf16-mixed": "bf16-mixed",
            "32": "32-true", "32-true": "32-true", "64": "64-true", "64-true": "64-true", "16-true": "16-true",
            "bf16-true": "bf16-true", "transformer-engine": "transformer-engine",
            "transformer-engine-float16": "transformer-engine-float16"}
_HALF = {"16": torch.float16, "bf16": torch.bfloat16}


def detect(doc: Document) -> bool:
    if not isinstance(doc.data, dict):
        return False
    trainer = doc.data.get("trainer")
    if isinstance(trainer, dict) and ({k for k in trainer if isinstance(k, str)} & _TRAINER_KEYS):
        return True
    # litgpt: top-level precision next to its own keys.
    return "precision" in doc.data and bool({"checkpoint_dir", "out_dir"} & set(doc.data)) and (
        "devices" in doc.data or isinstance(doc.data.get("train"), dict))


def _normalize_precision(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        value = str(int(value))
    return _ALIASES.get(str(value).strip().lower()) if isinstance(value, str) else None


def _strategy(doc: Document, base: KeyPath) -> tuple[str, Location, Any]:
    """(kind, where, init_args) with kind one of ddp, fsdp, deepspeed, single, auto, other."""
    raw = doc.get(*base, "strategy", default="auto")
    where = doc.at(*base, "strategy")
    init: Any = {}
    if isinstance(raw, dict):
        init = raw.get("init_args") or {}
        raw = raw.get("class_path", "")
    text = lower_str(raw) if isinstance(raw, str) else "auto"
    for kind in ("deepspeed", "fsdp", "ddp", "single", "auto"):
        if kind in text:
            return kind, where, init if isinstance(init, dict) else {}
    return "other", where, init


def read(doc: Document) -> EffectiveConfig:
    cfg = EffectiveConfig(NAME, doc.file, None, files=(doc.file,))
    base: KeyPath = ("trainer",) if isinstance(doc.get("trainer"), dict) else ()
    raw = doc.get(*base, "precision", default="32-true")
    at = doc.at(*base, "precision")
    precision = _normalize_precision(raw)
    if precision is None:
        cfg.findings.append(finding("precision-strategy-mismatch",
                                    f"precision={raw!r} is not a Lightning precision (32-true, 16-mixed, bf16-mixed, 16-true, bf16-true, 64-true)", at))
        return cfg
    cfg.set("precision", precision, at, not doc.has(*base, "precision"))
    devices = as_int(doc.get(*base, "devices"))
    nodes = as_int(doc.get(*base, "num_nodes", default=1)) or 1
    kind, kind_at, init = _strategy(doc, base)
    if not base and kind == "auto":
        kind = "fsdp" if (devices or 1) * nodes > 1 else "single"  # litgpt picks FSDP for several devices
    if devices is not None and devices > 0:
        cfg.set("world_size", devices * nodes, doc.at(*base, "devices"))
    cfg.set("strategy", kind, kind_at, not doc.has(*base, "strategy"))
    gas = as_int(doc.get(*base, "accumulate_grad_batches", default=1))
    if gas is not None:
        cfg.set("grad_accum_steps", gas, doc.at(*base, "accumulate_grad_batches"), not doc.has(*base, "accumulate_grad_batches"))
    prefix, _, mode = precision.partition("-")
    half = _HALF.get(prefix)

    if kind == "deepspeed":
        if mode == "true":
            cfg.findings.append(finding(
                "precision-strategy-mismatch",
                f"precision={precision!r} with the DeepSpeed strategy: Lightning 2.0 rejects it ('precision must be one of "
                "32-true, 16-mixed, bf16-mixed'); later versions run DeepSpeed's half engine with fp32 master weights",
                at, related=[kind_at], severity=_warning()))
        elif mode == "mixed":
            cfg.findings.append(finding(
                "precision-strategy-mismatch",
                f"precision={precision!r} with the DeepSpeed strategy is not autocast: DeepSpeed casts the whole model to "
                f"{'fp16' if prefix == '16' else 'bf16'} and keeps fp32 master weights in the optimizer (Lightning #18016)",
                at, related=[kind_at], severity=_warning()))
        stage = as_int(init.get("stage")) if isinstance(init, dict) else None
        if stage is None:
            digits = [c for c in lower_str(doc.get(*base, "strategy", default="")) if c.isdigit()] if isinstance(doc.get(*base, "strategy"), str) else []
            stage = int(digits[0]) if digits else 2
        fills: dict[tuple[str, ...], tuple[Any, Location]] = {
            ("bf16", "enabled"): (prefix == "bf16", at), ("fp16", "enabled"): (prefix == "16", at)}
        if gas is not None:
            fills[("gradient_accumulation_steps",)] = (gas, doc.at(*base, "accumulate_grad_batches"))
        config_path = init.get("config") if isinstance(init, dict) else None
        if isinstance(config_path, str):
            paths = resolve_path(doc.file, config_path)
            cfg.references.append(Reference(next((p for p in paths if p.is_file()), paths[0]),
                                            doc.at(*base, "strategy", "init_args", "config"), fills,
                                            Setting("bf16" if prefix == "bf16" else "fp16" if prefix == "16" else "no", at), NAME))
            return cfg
        inline = {"bf16": {"enabled": prefix == "bf16"}, "fp16": {"enabled": prefix == "16"},
                  "zero_optimization": {"stage": stage}, "gradient_accumulation_steps": gas or 1}
        locs = {("bf16",): at, ("bf16", "enabled"): at, ("fp16",): at, ("fp16", "enabled"): at,
                ("zero_optimization", "stage"): kind_at, ("gradient_accumulation_steps",): doc.at(*base, "accumulate_grad_batches")}
        deepspeed.fill_policy(Document(doc.file, doc.syntax, inline, locs), cfg)
        return cfg

    b = PolicyBuilder(at)
    if precision == "64-true":
        b.set("params", torch.float64, at)
    elif precision.startswith("transformer-engine"):
        b.set("compute", torch.float16 if precision.endswith("float16") else torch.bfloat16, at)
        b.set("params", torch.float32, at)
    elif half is not None and mode == "mixed":
        b.set("params", torch.float32, at)
        b.autocast(cfg, half, at)
        if kind == "fsdp":
            b.set("reduce", half, kind_at)
    elif half is not None and mode == "true":
        if kind == "fsdp":
            cfg.findings.append(finding(
                "precision-strategy-mismatch",
                f"precision={precision!r} with FSDP: FSDPPrecision casts compute and the gradient reduce to "
                f"{dtype_name(half)}, but the sharded weights stay fp32 unless the model is created under "
                "`trainer.init_module()` (Lightning #18717)",
                at, related=[kind_at], severity=_warning()))
            b.set("params", torch.float32, at)
            b.set("compute", half, at)
            b.set("reduce", half, kind_at)
        else:
            for name in ("params", "grad_accum", "reduce", "optimizer_state"):
                b.set(name, half, at)
            b.set("loss_scale", "none", at)
    cfg.policy, cfg.sources = b.build()
    cfg.set("optimizer_kind", "master" if cfg.policy.params in (torch.float32, torch.float64) else "plain", at, True)
    return cfg


def _warning():
    from ampdoctor.rules import Severity

    return Severity.WARNING


def export(policy: Policy) -> tuple[dict[str, Any], list[str]]:
    notes: list[str] = []
    compute, params = policy.compute, policy.params
    if params == torch.float64:
        precision = "64-true"
    elif compute in (torch.bfloat16, torch.float16) and params == torch.float32:
        precision = "bf16-mixed" if compute == torch.bfloat16 else "16-mixed"
    elif compute in (torch.bfloat16, torch.float16) and params == compute:
        precision = "bf16-true" if compute == torch.bfloat16 else "16-true"
    else:
        precision = "32-true"
        if compute != torch.float32 or params != torch.float32:
            notes.append(f"params={dtype_name(params)}, compute={dtype_name(compute)}: no Lightning precision runs this pair")
    config = {"trainer": {"precision": precision, "strategy": "ddp"}}
    true_mode = precision.endswith("-true") and precision not in ("32-true", "64-true")
    for name in ("grads", "grad_accum", "reduce", "optimizer_state"):
        value = getattr(policy, name)
        if value != params:
            extra = " (and under FSDP, FSDPPrecision reduces in the half dtype too)" if name == "reduce" and true_mode else ""
            notes.append(f"{name}={dtype_name(value)}: under precision={precision!r} it follows the parameters "
                         f"({dtype_name(params)}){extra}")
    if precision.endswith("-mixed") and policy.reduce != torch.float32:
        notes.append(f"reduce={dtype_name(policy.reduce)}: DDP reduces the fp32 gradients of {precision!r} in fp32; "
                     f"only strategy=fsdp reduces in {dtype_name(compute)}")
    expected_scale = "dynamic" if precision == "16-mixed" else "none"
    if policy.loss_scale != expected_scale:
        notes.append(f"loss_scale={policy.loss_scale}: Lightning scales the loss exactly for 16-mixed")
    if policy.output != compute:
        notes.append(f"output={dtype_name(policy.output)}: Lightning returns outputs in the compute dtype")
    return config, notes
