"""DeepSpeed JSON config -> effective Policy, and Policy -> DeepSpeed config.

Defaults modelled (deepspeed/runtime/engine.py `get_data_types`, config.py):
- a `fp16`/`bf16` block is off unless `"enabled": true`; `bfloat16` is the legacy spelling of `bf16`,
  and old DeeperSpeed/NeoX configs spell bf16 as `"fp16": {"enabled": true, "type": "bfloat16"}`;
- the model is cast to the enabled half dtype, the optimizer keeps an fp32 master copy (unless
  `bf16_master_weights_and_grads`) and fp32 state (unless `bf16_optimizer_states`);
- gradients accumulate in `data_types.grad_accum_dtype`, which defaults to the model dtype;
- collectives run in `communication_data_type`, which follows the model dtype when unset;
- fp16 uses dynamic loss scaling when `loss_scale` is 0 or absent, a static scale otherwise;
  the `loss_scale*` keys of a bf16 block are ignored (bf16 has no loss scaling);
- both fp16 and bf16 enabled is rejected ("bfloat16 and fp16 modes cannot be simultaneously enabled").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ampdoctor.frameworks.base import (
    EffectiveConfig,
    PolicyBuilder,
    as_bool,
    as_dtype,
    as_int,
    is_auto,
    lower_str,
)
from ampdoctor.frameworks.located import Document
from ampdoctor.policy import Policy, dtype_name
from ampdoctor.rules import Location, finding

NAME = "deepspeed"

_DS_KEYS = frozenset({
    "zero_optimization", "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "fp16", "bf16", "bfloat16", "amp", "data_types", "communication_data_type", "gradient_clipping",
    "zero_allow_untested_optimizer", "steps_per_print", "wall_clock_breakdown", "torch_autocast", "activation_checkpointing",
    "flops_profiler", "prescale_gradients", "gradient_predivide_factor", "sparse_attention",
})
_DS_ONLY = frozenset({"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size", "steps_per_print",
                      "wall_clock_breakdown", "zero_allow_untested_optimizer", "communication_data_type", "torch_autocast"})


def detect(doc: Document) -> bool:
    if not isinstance(doc.data, dict):
        return False
    keys = {k for k in doc.data if isinstance(k, str)}
    if keys & _DS_ONLY:
        return True
    blocks = [k for k in ("fp16", "bf16", "bfloat16", "amp") if isinstance(doc.data.get(k), dict)]
    return bool(blocks) and len(keys & _DS_KEYS) >= 2


@dataclass(frozen=True)
class Mode:
    """Which precision engine DeepSpeed runs: "bf16", "fp16", "amp" (apex), "autocast", "fp32", or None if "auto"."""

    name: str | None
    location: Location


def _enabled(doc: Document, block: str) -> tuple[bool | None, Location | None]:
    """(enabled, where) for a precision block; (False, None) when the block is absent."""
    if not doc.has(block):
        return False, None
    value = doc.get(block)
    if not isinstance(value, dict):
        return as_bool(value), doc.at(block)
    if "enabled" not in value:
        return False, doc.at(block)
    raw = value["enabled"]
    return (None if is_auto(raw) else bool(as_bool(raw))), doc.at(block, "enabled")


def precision_mode(doc: Document, findings: list | None = None) -> Mode:
    """The engine's precision mode; blocks that DeepSpeed rejects together are reported into `findings`."""
    findings = [] if findings is None else findings
    fp16_on, fp16_at = _enabled(doc, "fp16")
    bf16_block = "bf16" if doc.has("bf16") else "bfloat16"
    bf16_on, bf16_at = _enabled(doc, bf16_block)
    if fp16_on and lower_str(doc.get("fp16", "type")) in ("bfloat16", "bf16"):
        # DeeperSpeed/old NeoX spelling of bf16.
        fp16_on, bf16_on, bf16_at, fp16_at = False, True, fp16_at, None
    amp_on, amp_at = _enabled(doc, "amp")
    auto_on, auto_at = _enabled(doc, "torch_autocast")
    if fp16_on and bf16_on:
        assert fp16_at is not None and bf16_at is not None
        later, earlier = (bf16_at, fp16_at) if (bf16_at.line or 0) >= (fp16_at.line or 0) else (fp16_at, bf16_at)
        findings.append(finding(
            "fp16-bf16-both-enabled",
            "both fp16 and bf16 are enabled: DeepSpeed stops with 'bfloat16 and fp16 modes cannot be simultaneously enabled'",
            later, related=[earlier]))
    if auto_on and (fp16_on or bf16_on):
        other = bf16_at if bf16_on else fp16_at
        findings.append(finding(
            "precision-config-mismatch",
            f"torch_autocast is enabled together with the {'bf16' if bf16_on else 'fp16'} block: DeepSpeed's autocast mode "
            "keeps fp32 parameters and cannot be combined with its fp16/bf16 engines",
            auto_at, related=[other] if other else []))
    if amp_on and as_int(doc.get("zero_optimization", "stage", default=0)):
        findings.append(finding(
            "precision-strategy-mismatch",
            "apex `amp` is enabled with ZeRO: DeepSpeed asserts 'Amp and ZeRO are not currently compatible'",
            amp_at, related=[doc.at("zero_optimization", "stage")]))
    if bf16_on:
        return Mode("bf16", bf16_at)  # type: ignore[arg-type]
    if fp16_on:
        return Mode("fp16", fp16_at)  # type: ignore[arg-type]
    if amp_on:
        return Mode("amp", amp_at)  # type: ignore[arg-type]
    if auto_on:
        return Mode("autocast", auto_at)  # type: ignore[arg-type]
    if bf16_on is None or fp16_on is None:
        return Mode(None, (bf16_at if bf16_on is None else fp16_at) or Location(file=doc.file))
    return Mode("fp32", bf16_at or fp16_at or Location(file=doc.file))


def fill_policy(doc: Document, cfg: EffectiveConfig, *, reduce_fp32: tuple[bool, Location] | None = None) -> None:
    """Set cfg.policy, its sources and the DeepSpeed facts (accumulation, ZeRO stage, world size, scaler) from `doc`."""
    mode = precision_mode(doc, cfg.findings)
    cfg.set("engine_precision", mode.name, mode.location)
    stage = as_int(doc.get("zero_optimization", "stage", default=0))
    cfg.set("zero_stage", stage if stage is not None else 0, doc.at("zero_optimization", "stage"), not doc.has("zero_optimization", "stage"))
    gas = doc.get("gradient_accumulation_steps", default=1)
    if not is_auto(gas) and as_int(gas) is not None:
        cfg.set("grad_accum_steps", as_int(gas), doc.at("gradient_accumulation_steps"), not doc.has("gradient_accumulation_steps"))
    micro, total = as_int(doc.get("train_micro_batch_size_per_gpu")), as_int(doc.get("train_batch_size"))
    steps = cfg.fact("grad_accum_steps")
    if micro and total and steps and total % (micro * steps) == 0:
        cfg.set("world_size", total // (micro * steps), doc.at("train_batch_size"))
    if mode.name is None:
        cfg.policy = None
        return
    b = PolicyBuilder(mode.location)
    half = {"bf16": torch.bfloat16, "fp16": torch.float16, "amp": torch.float16}.get(mode.name)
    if mode.name == "autocast":
        half = as_dtype(doc.get("torch_autocast", "dtype", default="bfloat16")) or torch.bfloat16
        b.set("params", torch.float32, mode.location)
        b.set("compute", half, doc.at("torch_autocast", "dtype") if doc.has("torch_autocast", "dtype") else mode.location)
        b.set("loss_scale", "none", mode.location)
    elif half is not None:
        block = "bf16" if doc.has("bf16") else ("bfloat16" if doc.has("bfloat16") else "fp16")
        master_half = mode.name == "bf16" and bool(as_bool(doc.get(block, "bf16_master_weights_and_grads", default=False)))
        params = half if master_half else torch.float32
        b.set("params", params, doc.at(block, "bf16_master_weights_and_grads") if master_half else mode.location)
        b.set("compute", half, mode.location)
        b.set("grads", params, mode.location)
        accum_raw = doc.get("data_types", "grad_accum_dtype")
        accum = as_dtype(accum_raw)
        if mode.name == "amp":
            accum = torch.float32  # apex amp keeps fp32 params, so .grad is fp32
        b.set("grad_accum", accum or half, doc.at("data_types", "grad_accum_dtype") if accum_raw is not None else mode.location)
        comm_raw = doc.get("communication_data_type")
        comm = as_dtype(comm_raw) if comm_raw is not None else None
        if reduce_fp32 is not None and reduce_fp32[0] and comm is None:
            b.set("reduce", torch.float32, reduce_fp32[1])
        else:
            b.set("reduce", comm or (torch.float32 if mode.name == "amp" else half),
                  doc.at("communication_data_type") if comm is not None else mode.location)
        opt_half = mode.name == "bf16" and bool(as_bool(doc.get(block, "bf16_optimizer_states", default=False)))
        b.set("optimizer_state", half if opt_half else torch.float32,
              doc.at(block, "bf16_optimizer_states") if opt_half else mode.location)
        if mode.name in ("fp16", "amp"):
            scale = doc.get(block if mode.name == "fp16" else "fp16", "loss_scale", default=0)
            static = isinstance(scale, (int, float)) and not isinstance(scale, bool) and scale > 0
            b.set("loss_scale", "static" if static else "dynamic", doc.at("fp16", "loss_scale") if doc.has("fp16", "loss_scale") else mode.location)
            cfg.set("loss_scaler", "static" if static else "dynamic", mode.location)
        else:
            b.set("loss_scale", "none", mode.location)
    cfg.policy, cfg.sources = b.build()
    cfg.set("optimizer_kind", "master" if cfg.policy.params == torch.float32 else "plain", mode.location, True)


def read(doc: Document) -> EffectiveConfig:
    cfg = EffectiveConfig(NAME, doc.file, None, files=(doc.file,))
    fill_policy(doc, cfg)
    return cfg


# --- export ------------------------------------------------------------------------------------------

_DS_DTYPE = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def export(policy: Policy) -> tuple[dict[str, Any], list[str]]:
    """The DeepSpeed keys that make the engine run `policy`, and what DeepSpeed cannot express."""
    notes: list[str] = []
    config: dict[str, Any] = {}
    compute, params = policy.compute, policy.params
    if compute == torch.bfloat16:
        block: dict[str, Any] = {"enabled": True}
        if params == torch.bfloat16:
            block["bf16_master_weights_and_grads"] = True
        elif params != torch.float32:
            notes.append(f"params={dtype_name(params)}: DeepSpeed's bf16 engine keeps fp32 or bf16 master weights only")
        if policy.optimizer_state == torch.bfloat16:
            block["bf16_optimizer_states"] = True
        config["fp16"] = {"enabled": False}
        config["bf16"] = block
    elif compute == torch.float16:
        block = {"enabled": True}
        if policy.loss_scale == "dynamic":
            block.update({"loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1})
        elif policy.loss_scale == "static":
            block["loss_scale"] = 1024
        else:
            notes.append("loss_scale=none with fp16 compute: DeepSpeed's fp16 engine always scales the loss (dynamic or static)")
            block["loss_scale"] = 0
        if params != torch.float32:
            notes.append(f"params={dtype_name(params)}: DeepSpeed's fp16 engine always keeps fp32 master weights")
        config["fp16"] = block
        config["bf16"] = {"enabled": False}
    else:
        config["fp16"] = {"enabled": False}
        config["bf16"] = {"enabled": False}
        if compute != torch.float32:
            notes.append(f"compute={dtype_name(compute)}: DeepSpeed trains in fp32, fp16 or bf16 only")
    if compute in (torch.bfloat16, torch.float16):
        if policy.grad_accum in _DS_DTYPE:
            config["data_types"] = {"grad_accum_dtype": _DS_DTYPE[policy.grad_accum]}
        if policy.reduce in _DS_DTYPE:
            config["communication_data_type"] = _DS_DTYPE[policy.reduce]
        if policy.output != compute:
            notes.append(f"output={dtype_name(policy.output)}: DeepSpeed returns module outputs in the compute dtype; cast in the loss")
    else:
        for name in ("grad_accum", "reduce", "optimizer_state"):
            if getattr(policy, name) != torch.float32:
                notes.append(f"{name}={dtype_name(getattr(policy, name))}: an fp32 DeepSpeed run keeps it fp32")
    return config, notes
