"""HF accelerate config YAML (`accelerate config` / `accelerate launch --config_file`) -> Policy.

- `mixed_precision: bf16|fp16|no` turns on autocast (fp16 adds a GradScaler); the model keeps the dtype it was
  loaded in, which the config cannot show (fp32 assumed).
- `distributed_type: DEEPSPEED` with `deepspeed_config.deepspeed_config_file` (resolved next to the YAML first):
  accelerate fills the file's "auto" values and adds a missing fp16/bf16 block from `mixed_precision`, and
  refuses the opposite half type ("`--mixed_precision` arg cannot be set to `bf16` when `fp16` is set in the
  DeepSpeed config file"). Without a file, the inline keys (zero_stage, gradient_accumulation_steps) and
  `mixed_precision` make the DeepSpeed config.
- `distributed_type: FSDP`: accelerate sets FSDP `MixedPrecision(param_dtype=dtype, reduce_dtype=dtype)` from
  `mixed_precision`, so gradients are reduced in bf16/fp16.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ampdoctor.core.model import Location
from ampdoctor.dtypes import BF16, FP16, FP32
from ampdoctor.frameworks import deepspeed
from ampdoctor.frameworks.base import PolicyBuilder, Reading, Reference, Setting, as_int, as_path_value, first_file, lower_str, resolve_path
from ampdoctor.frameworks.located import Document
from ampdoctor.frameworks.reader import Reader
from ampdoctor.policy import Policy

NAME = "accelerate"

_KEYS = frozenset({"compute_environment", "distributed_type", "mixed_precision", "num_processes", "num_machines",
                   "machine_rank", "main_process_port", "main_process_ip", "use_cpu", "deepspeed_config", "fsdp_config",
                   "main_training_function", "downcast_bf16", "gpu_ids", "rdzv_backend", "same_network", "tpu_env",
                   "dynamo_config", "megatron_lm_config", "enable_cpu_affinity"})
# fp8 runs under bf16 autocast (accelerate `get_mixed_precision_context_manager`).
_HALF = {"bf16": BF16, "fp16": FP16, "fp8": BF16}


def detect(doc: Document) -> bool:
    if not isinstance(doc.data, dict):
        return False
    keys = {k for k in doc.data if isinstance(k, str)}
    if keys & {"compute_environment", "distributed_type"}:
        return True
    return "mixed_precision" in keys and len(keys & _KEYS) >= 2


def _deepspeed(doc: Document, cfg: Reading, mp: str, mp_at: Location) -> None:
    ds = doc.get("deepspeed_config", default={}) or {}
    ds = ds if isinstance(ds, dict) else {}
    gas = as_int(ds.get("gradient_accumulation_steps"))
    gas_at = doc.at("deepspeed_config", "gradient_accumulation_steps")
    file_value = as_path_value(ds.get("deepspeed_config_file"))
    # `DeepSpeedPlugin(hf_ds_config=...)` in code: a path, or the DeepSpeed config itself as a dict.
    given = ds.get("hf_ds_config")
    inline_key = "hf_ds_config" if isinstance(given, dict) else None
    file_value = file_value or as_path_value(given)
    explicit = _asks_precision(doc, cfg, mp_at)
    if file_value is not None or inline_key is not None:
        # accelerate fills the file's "auto" keys from mixed_precision; left unset, the file decides the precision
        # (accelerate's state reads fp16/bf16 from it), so only an explicit value can disagree with the file.
        fills: dict[tuple[str, ...], tuple[Any, Location]] = {}
        if explicit and mp in ("bf16", "fp16", "no"):
            fills[("bf16", "enabled")] = (mp == "bf16", mp_at)
            fills[("fp16", "enabled")] = (mp == "fp16", mp_at)
        if gas is not None:
            fills[("gradient_accumulation_steps",)] = (gas, gas_at)
        where = doc.at("deepspeed_config", inline_key or ("deepspeed_config_file" if doc.has("deepspeed_config", "deepspeed_config_file") else "hf_ds_config"))
        inline = doc.sub("deepspeed_config", inline_key) if inline_key else None
        path = Path(doc.file) if inline is not None else first_file(resolve_path(doc.file, file_value or ""))
        cfg.references.append(Reference(path, where, fills, Setting(mp, mp_at) if explicit else None, NAME, inline=inline))
        return
    inline: dict[str, Any] = {"bf16": {"enabled": mp == "bf16"}, "fp16": {"enabled": mp == "fp16"}}
    locs: dict[tuple[Any, ...], Location] = {("bf16",): mp_at, ("bf16", "enabled"): mp_at, ("fp16",): mp_at, ("fp16", "enabled"): mp_at}
    stage = as_int(ds.get("zero_stage"))
    if stage is not None:
        inline["zero_optimization"] = {"stage": stage}
        locs[("zero_optimization", "stage")] = doc.at("deepspeed_config", "zero_stage")
    if gas is not None:
        inline["gradient_accumulation_steps"] = gas
        locs[("gradient_accumulation_steps",)] = gas_at
    deepspeed.fill_policy(Document(doc.file, doc.syntax, inline, locs), cfg)


def _asks_precision(doc: Document, cfg: Reading, mp_at: Location) -> bool:
    """Does the config's `mixed_precision` reach the DeepSpeed engine: written, not null, and not beside the YAML's own
    `deepspeed_config_file`. `accelerate launch` with such a YAML lists a `mixed_precision` taken from it among the
    fields its DeepSpeed plugin refuses beside that file (commands/launch.py `mp_from_config_flag`,
    DeepSpeedPlugin._deepspeed_config_checks: "When using `deepspeed_config_file`, the following accelerate config
    variables will be ignored"), noted as `launch_refused`; where the command line passes `--mixed_precision`, that
    value fills the file instead. Either way the YAML's own value never reaches the engine."""
    if not doc.has("mixed_precision") or doc.get("mixed_precision") is None:
        return False
    if doc.has("deepspeed_config", "deepspeed_config_file"):
        cfg.set("launch_refused", "mixed_precision", mp_at)
        cfg.place("deepspeed_config_file", doc.at("deepspeed_config", "deepspeed_config_file"))
        return False
    return True


def read(doc: Document) -> Reading:
    cfg = Reading(NAME, doc.file)
    mp_raw = doc.get("mixed_precision", default="no")
    mp = lower_str(mp_raw) or ("no" if mp_raw in (None, False) else str(mp_raw))
    mp_at = doc.at("mixed_precision")
    dist = lower_str(doc.get("distributed_type", default="no"))
    cfg.set("precision_setting", mp, mp_at, not doc.has("mixed_precision"))
    cfg.set("strategy", dist, doc.at("distributed_type"), not doc.has("distributed_type"))
    procs = as_int(doc.get("num_processes"))
    if procs is not None and procs > 0:
        cfg.set("world_size", procs, doc.at("num_processes"))
    if dist == "deepspeed":
        _deepspeed(doc, cfg, mp, mp_at)
        return cfg
    half = _HALF.get(mp)
    b = PolicyBuilder(mp_at)
    b.set("params", FP32, mp_at)
    if half is not None:
        b.autocast(cfg, half, mp_at)
        if dist == "fsdp":
            # FullyShardedDataParallelPlugin.set_mixed_precision: reduce_dtype = the mixed-precision dtype.
            b.set("reduce", half, doc.at("fsdp_config") if doc.has("fsdp_config") else mp_at)
            # With mixed precision on, accelerate's FSDP preparation upcasts trainable half parameters to fp32:
            # the run keeps fp32 masters of a model loaded in bf16.
            cfg.set("master_weights", "params", doc.at("distributed_type"), True)
    cfg.policy, cfg.sources = b.build()
    cfg.set("optimizer_kind", "master", mp_at, True)
    return cfg


def export(policy: Policy) -> tuple[dict[str, Any], list[str]]:
    notes: list[str] = []
    mp = {BF16: "bf16", FP16: "fp16"}.get(policy.compute, "no")
    if policy.compute not in (BF16, FP16, FP32):
        notes.append(f"compute={policy.compute}: accelerate's mixed_precision is no, fp16, bf16 or fp8")
    config: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_GPU", "mixed_precision": mp}
    if policy.params != FP32:
        notes.append(f"params={policy.params}: accelerate keeps the dtype the model was loaded in; "
                     f"load it with torch_dtype={policy.params} in the script")
    for name in ("grads", "grad_accum", "reduce"):
        if getattr(policy, name) != policy.params:
            notes.append(f"{name}={getattr(policy, name)}: under DDP gradients, their accumulation and all-reduce follow the parameter dtype ({policy.params})")
    if policy.optimizer_state != policy.params:
        notes.append(f"optimizer_state={policy.optimizer_state}: the optimizer (chosen in code) decides its state dtype")
    expected_scale = "dynamic" if policy.compute == FP16 else "none"
    if policy.loss_scale != expected_scale:
        notes.append(f"loss_scale={policy.loss_scale}: accelerate uses a dynamic GradScaler exactly when mixed_precision is fp16")
    return config, notes


READER = Reader(NAME, detect, read, export=export)
