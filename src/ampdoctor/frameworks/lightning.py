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

from ampdoctor.core.model import Location
from ampdoctor.dtypes import BF16, FP16, FP32, FP64
from ampdoctor.frameworks import deepspeed
from ampdoctor.frameworks.base import PolicyBuilder, Reading, Reference, Setting, as_int, as_path_value, first_file, lower_str, resolve_path
from ampdoctor.frameworks.located import Document, KeyPath
from ampdoctor.frameworks.reader import Reader
from ampdoctor.policy import Policy

NAME = "lightning"
LITGPT = "litgpt"

_TRAINER_KEYS = frozenset({"precision", "strategy", "devices", "accelerator", "max_epochs", "max_steps", "num_nodes",
                           "accumulate_grad_batches", "callbacks", "logger", "gradient_clip_val", "log_every_n_steps",
                           "val_check_interval", "plugins", "default_root_dir", "enable_checkpointing"})
_ALIASES = {"16": "16-mixed", "16-mixed": "16-mixed", "bf16": "bf16-mixed", "bf16-mixed": "bf16-mixed",
            "32": "32-true", "32-true": "32-true", "64": "64-true", "64-true": "64-true", "16-true": "16-true",
            "bf16-true": "bf16-true", "transformer-engine": "transformer-engine",
            "transformer-engine-float16": "transformer-engine-float16"}
# Lightning's precision values (fabric/plugins/precision/precision.py `_PRECISION_INPUT_STR`).
PRECISIONS = frozenset(_ALIASES.values())
_HALF = {"16": FP16, "bf16": BF16}


def detect(doc: Document) -> bool:
    if not isinstance(doc.data, dict):
        return False
    trainer = doc.data.get("trainer")
    if isinstance(trainer, dict) and ({k for k in trainer if isinstance(k, str)} & _TRAINER_KEYS):
        return True
    # litgpt: top-level precision next to its own keys.
    return "precision" in doc.data and bool({"checkpoint_dir", "out_dir"} & set(doc.data)) and (
        "devices" in doc.data or isinstance(doc.data.get("train"), dict))


def normalize_precision(value: Any) -> str | None:
    """Lightning's canonical spelling of a precision value, None for one it does not accept."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        if not value.is_integer():  # 16.5, and NaN and infinity, which int() refuses
            return None
        value = int(value)
    if isinstance(value, int):
        value = str(value)
    # `_convert_precision_to_unified_args` (fabric/connector.py) checks `precision not in supported_precision` on the
    # value as written: no stripping, no lower-casing, so "BF16-mixed" or " bf16-mixed" raise "Precision ... is invalid".
    return _ALIASES.get(value) if isinstance(value, str) else None


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


def _deepspeed(doc: Document, cfg: Reading, base: KeyPath, precision: str, at: Location, kind_at: Location, init: Any) -> None:
    """DeepSpeed under Lightning: `*-mixed` runs DeepSpeed's fp16/bf16 engine (the model is cast, fp32 masters in
    the optimizer, Lightning #18016)."""
    prefix = precision.partition("-")[0]
    gas = cfg.fact("grad_accum_steps")
    stage = as_int(init.get("stage")) if isinstance(init, dict) else None
    if stage is None:
        raw = doc.get(*base, "strategy")
        digits = [c for c in lower_str(raw) if c.isdigit()] if isinstance(raw, str) else []
        stage = int(digits[0]) if digits else 2
    fills: dict[tuple[str, ...], tuple[Any, Location]] = {("bf16", "enabled"): (prefix == "bf16", at), ("fp16", "enabled"): (prefix == "16", at)}
    if gas is not None:
        fills[("gradient_accumulation_steps",)] = (gas, doc.at(*base, "accumulate_grad_batches"))
    config_path = as_path_value(init.get("config")) if isinstance(init, dict) else None
    if config_path is not None:
        asked = Setting("bf16" if prefix == "bf16" else "fp16" if prefix == "16" else "no", at)
        cfg.references.append(Reference(first_file(resolve_path(doc.file, config_path)), doc.at(*base, "strategy", "init_args", "config"),
                                        fills, asked, NAME))
        return
    inline = {"bf16": {"enabled": prefix == "bf16"}, "fp16": {"enabled": prefix == "16"},
              "zero_optimization": {"stage": stage}, "gradient_accumulation_steps": gas or 1}
    locs = {("bf16",): at, ("bf16", "enabled"): at, ("fp16",): at, ("fp16", "enabled"): at,
            ("zero_optimization", "stage"): kind_at, ("gradient_accumulation_steps",): doc.at(*base, "accumulate_grad_batches")}
    deepspeed.fill_policy(Document(doc.file, doc.syntax, inline, locs), cfg)
    # Lightning's fill_policy facts: the engine's half blocks come from `precision`, not from two keys.
    cfg.set("half_modes_enabled", (), at)


def _plain(cfg: Reading, precision: str, kind: str, at: Location, kind_at: Location) -> None:
    """DDP/single device/FSDP: `*-mixed` autocasts fp32 weights; `*-true` casts the module (under FSDP the
    sharded weights stay fp32 unless the model is created under `trainer.init_module()`, Lightning #18717)."""
    prefix, _, mode = precision.partition("-")
    half = _HALF.get(prefix)
    b = PolicyBuilder(at)
    if precision == "64-true":
        b.set("params", FP64, at)
    elif precision.startswith("transformer-engine"):
        b.set("compute", FP16 if precision.endswith("float16") else BF16, at)
        b.set("params", FP32, at)
    elif half is not None and mode == "mixed":
        b.set("params", FP32, at)
        b.autocast(cfg, half, at)
        if kind == "fsdp":
            b.set("reduce", half, kind_at)  # FSDPPrecision: reduce_dtype = the half dtype
    elif half is not None and kind == "fsdp" and cfg.framework != LITGPT:
        # LightningCLI: the sharded weights stay fp32 unless the module is built under trainer.init_module().
        b.set("params", FP32, at)
        b.set("compute", half, at)
        b.set("reduce", half, kind_at)
    elif half is not None:
        for name in ("params", "grad_accum", "reduce", "optimizer_state"):
            b.set(name, half, at)
        b.set("loss_scale", "none", at)
        cfg.set("autocast", False, at)
    cfg.policy, cfg.sources = b.build()
    cfg.set("optimizer_kind", "master" if cfg.policy.params in (FP32, FP64) else "plain", at, True)


def read(doc: Document) -> Reading:
    base: KeyPath = ("trainer",) if isinstance(doc.get("trainer"), dict) else ()
    # litgpt builds every model under `fabric.init_module()`: with a `*-true` precision the weights are created in
    # the half dtype, FSDP included.
    cfg = Reading(NAME if base else LITGPT, doc.file)
    # `precision: null` is the argument's default, as an absent key is: the Trainer (and litgpt) pick 32-true or
    # their own default for None (`_convert_precision_to_unified_args(None)` returns None), they do not refuse it.
    raw = doc.get(*base, "precision")
    unset = raw is None
    raw = "32-true" if unset else raw
    at = doc.at(*base, "precision")
    precision = normalize_precision(raw)
    cfg.set("precision_setting", precision or str(raw), at, unset)
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
    if precision is None:
        return cfg  # Lightning refuses the value; the rules say so
    if kind == "deepspeed":
        _deepspeed(doc, cfg, base, precision, at, kind_at, init)
    else:
        _plain(cfg, precision, kind, at, kind_at)
    return cfg


def export(policy: Policy) -> tuple[dict[str, Any], list[str]]:
    notes: list[str] = []
    compute, params = policy.compute, policy.params
    if params == FP64:
        precision = "64-true"
    elif compute in (BF16, FP16) and params == FP32:
        precision = "bf16-mixed" if compute == BF16 else "16-mixed"
    elif compute in (BF16, FP16) and params == compute:
        precision = "bf16-true" if compute == BF16 else "16-true"
    else:
        precision = "32-true"
        if compute != FP32 or params != FP32:
            notes.append(f"params={params}, compute={compute}: no Lightning precision runs this pair")
    config = {"trainer": {"precision": precision, "strategy": "ddp"}}
    true_mode = precision.endswith("-true") and precision not in ("32-true", "64-true")
    for name in ("grads", "grad_accum", "reduce", "optimizer_state"):
        value = getattr(policy, name)
        if value != params:
            extra = " (and under FSDP, FSDPPrecision reduces in the half dtype too)" if name == "reduce" and true_mode else ""
            notes.append(f"{name}={value}: under precision={precision!r} it follows the parameters "
                         f"({params}){extra}")
    if precision.endswith("-mixed") and policy.reduce != FP32:
        notes.append(f"reduce={policy.reduce}: DDP reduces the fp32 gradients of {precision!r} in fp32; "
                     f"only strategy=fsdp reduces in {compute}")
    expected_scale = "dynamic" if precision == "16-mixed" else "none"
    if policy.loss_scale != expected_scale:
        notes.append(f"loss_scale={policy.loss_scale}: Lightning scales the loss exactly for 16-mixed")
    if policy.output != compute:
        notes.append(f"output={policy.output}: Lightning returns outputs in the compute dtype")
    return config, notes


READER = Reader(NAME, detect, read, export=export)
