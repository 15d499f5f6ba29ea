"""Checks on one effective configuration: what the framework will run (its `Policy` and facts), not how
the file spells it. Framework-specific refusals (Lightning's strategy table, NeoX's precision derivation,
DeepSpeed's both-enabled) are found by the readers; cross-file ones by `lint.configs`."""

from __future__ import annotations

import re

import torch

from ampdoctor.frameworks.base import EffectiveConfig
from ampdoctor.frameworks.launchers import Hardware
from ampdoctor.policy import dtype_name, is_half
from ampdoctor.rules import Finding, Location, Severity, finding

# Data-parallel world size from which a half-precision gradient reduce is a warning rather than a note
# (the rounding error grows with the number of ranks: pytorch #106395 at 48x8 GPUs, Megatron-LM #6199).
LARGE_WORLD = 16
# Checkpoints pretrained in bf16 (overflow when fine-tuned or cast to fp16), T5's `wo` kept fp32 by transformers.
_BF16_PRETRAINED = re.compile(r"(^|[/_-])(t5|mt5|flan-t5|byt5|ul2|umt5|gemma|llama-3|meta-llama-3|qwen2|qwen3)", re.I)
_SAFE_OPTIMIZER_KINDS = ("kahan", "stochastic-rounding", "master")


def check_config(cfg: EffectiveConfig) -> list[Finding]:
    out = list(_flash_attention(cfg))
    p = cfg.policy
    if p is None:
        return out
    steps = cfg.fact("grad_accum_steps", 1) or 1
    adapters = bool(cfg.fact("adapters_only", False))
    kind = cfg.fact("optimizer_kind", "plain")
    src = cfg.sources
    scaler_at = cfg.where("loss_scaler") if "loss_scaler" in cfg.facts else src["loss_scale"]

    if p.loss_scale != "none" and torch.bfloat16 in (p.compute, p.grads):
        reason = cfg.fact("scaler_reason")
        grads_bf16 = p.grads == torch.bfloat16
        out.append(finding(
            "grad-scaler-with-bf16",
            f"a GradScaler is on ({reason or f'loss_scale={p.loss_scale}'}) while "
            + (f"the weights and gradients are bf16: GradScaler.unscale_ fails with '\"_amp_foreach_non_finite_check_and_unscale_cuda\" "
               "not implemented for 'BFloat16'' (incident 4)" if grads_bf16 else "compute is bf16, which needs no loss scaling"),
            scaler_at, related=_others(scaler_at, src["params"] if grads_bf16 else src["compute"])))
    elif p.loss_scale != "none" and p.grads == torch.float16 and not adapters:
        out.append(finding(
            "grad-scaler-with-fp16-params",
            "a GradScaler unscales gradients of fp16 weights: 'ValueError: Attempting to unscale FP16 gradients.'",
            scaler_at, related=_others(scaler_at, src["params"])))
    if p.compute == torch.float16 and p.loss_scale == "none":
        out.append(finding("fp16-without-loss-scaling", "fp16 compute without loss scaling: small gradients underflow to zero",
                           src["compute"]))
    if is_half(p.params) and is_half(p.compute) and p.params != p.compute:
        out.append(finding(
            "mixed-half-dtypes",
            f"weights are {dtype_name(p.params)} but compute is {dtype_name(p.compute)}: bf16 and fp16 meet in one graph",
            src["compute"], related=_others(src["compute"], src["params"])))
    if p.grads != p.params and steps > 1:
        out.append(finding(
            "grad-dtype-mismatch",
            f".grad is cast to {dtype_name(p.grads)} for {dtype_name(p.params)} weights with gradient accumulation ({steps} steps): "
            f"the next micro-batch's backward accumulates a {dtype_name(p.params)} gradient into it and fails "
            "('Expected BFloat16, got Float', incident 3)",
            src["grads"], related=_others(src["grads"], src["params"], cfg.where("grad_accum_steps"))))
    if p.grad_accum == torch.bfloat16 and steps > 1:
        out.append(finding(
            "bf16-grad-accumulation",
            f"gradients of {steps} micro-batches are summed in bf16 (8 significant bits): set an fp32 accumulation "
            "(DeepSpeed `data_types.grad_accum_dtype: fp32`) or fp32 master gradients",
            src["grad_accum"], related=_others(src["grad_accum"], cfg.where("grad_accum_steps"))))
    if is_half(p.reduce):
        world = cfg.fact("world_size")
        if world != 1:
            large = world is not None and world >= LARGE_WORLD
            size = f"{world} ranks" if world else "a world size the config does not fix"
            out.append(finding(
                "low-precision-reduce",
                f"gradients are all-reduced in {dtype_name(p.reduce)} over {size}: every hop rounds, and the error grows with the ranks",
                src["reduce"], severity=None if large else Severity.INFO,
                related=_others(src["reduce"], cfg.where("world_size")) if world else ()))
    autocast = cfg.fact("autocast")
    if is_half(p.params) and not adapters and kind not in _SAFE_OPTIMIZER_KINDS:
        if autocast is not None:
            out.append(finding(
                "mixed-precision-without-master-weights",
                f"mixed precision is on ({dtype_name(autocast)} autocast) but the trainable weights are already "
                f"{dtype_name(p.params)}: there is no fp32 master copy, so small updates round away",
                cfg.where("autocast"), related=_others(cfg.where("autocast"), src["params"])))
        else:
            out.append(finding(
                "pure-bf16-optimizer",
                f"weights are {dtype_name(p.params)} and the optimizer keeps no fp32 master copy, Kahan sum or stochastic "
                "rounding: updates below ~1/256 of a weight are lost (suppress if this is deliberate)",
                src["params"], related=_others(src["params"], cfg.where("optimizer_kind"))))
    if is_half(p.optimizer_state) and not is_half(p.params):
        out.append(finding("low-precision-optimizer-state",
                           f"optimizer state is {dtype_name(p.optimizer_state)} while weights are {dtype_name(p.params)}",
                           src["optimizer_state"]))
    required = cfg.fact("optimizer_requires")
    if required is not None and p.params != required:
        out.append(finding(
            "optimizer-dtype-mismatch",
            f"optimizer {cfg.fact('optimizer')!r} needs {dtype_name(required)} weights but they are {dtype_name(p.params)} "
            "('AssertionError: only bfloat 16 is supported.')",
            cfg.where("optimizer"), related=_others(cfg.where("optimizer"), src["params"])))
    out.extend(_keep_fp32(cfg))
    return out


def _flash_attention(cfg: EffectiveConfig) -> list[Finding]:
    attn = cfg.fact("attn_implementation") or ""
    if not str(attn).startswith("flash_attention"):
        return []
    model = cfg.fact("model_dtype")
    if model not in (torch.float32, torch.float64):
        return []
    p = cfg.policy
    half_compute = p is not None and is_half(p.compute)
    return [finding(
        "flash-attention-fp32-model",
        f"attn_implementation={attn} with the model loaded in {dtype_name(model)}"
        + (f": it only runs because {dtype_name(p.compute)} autocast casts q/k/v; transformers still warns" if half_compute and p else
           ": FlashAttention supports only fp16/bf16 inputs ('Flash Attention 2.0 only supports torch.float16 and torch.bfloat16 dtypes')"),
        cfg.where("attn_implementation"), severity=Severity.INFO if half_compute else None,
        related=_others(cfg.where("attn_implementation"), cfg.where("model_dtype")))]


def _keep_fp32(cfg: EffectiveConfig) -> list[Finding]:
    name = cfg.fact("model_name")
    p = cfg.policy
    if not isinstance(name, str) or p is None or not _BF16_PRETRAINED.search(name):
        return []
    fp16_weights = p.params == torch.float16 or cfg.fact("engine_precision") == "fp16" or cfg.fact("model_dtype") == torch.float16
    if not (fp16_weights or p.compute == torch.float16):
        return []
    at = cfg.sources["compute"]
    return [finding(
        "keep-fp32-module-cast",
        f"{name} was pretrained in bf16 and is run in fp16" + (" with its weights cast to fp16 (T5's `wo` and other keep-fp32 "
                                                               "modules included)" if fp16_weights else "")
        + ": activations overflow to inf/NaN", at, related=_others(at, cfg.where("model_name")))]


def check_hardware(configs: list[EffectiveConfig], hardware: list[Hardware]) -> list[Finding]:
    """bf16 asked for by a config next to hardware that has no native bf16."""
    out: list[Finding] = []
    for hw in hardware:
        for cfg in configs:
            p = cfg.policy
            if p is None or torch.bfloat16 not in (p.params, p.compute):
                continue
            bf16_at = cfg.sources["compute"] if p.compute == torch.bfloat16 else cfg.sources["params"]
            out.append(finding(
                "bf16-unsupported-hardware",
                f"{cfg.framework} config {cfg.file} trains in bf16 but {hw.name} (compute capability {hw.capability}) has no "
                "native bf16: it is emulated or refused ('Bfloat16 is only supported on GPUs with compute capability of at least 8.0')",
                hw.location, related=_others(hw.location, bf16_at)))
    return out


def _others(here: Location, *locations: Location) -> list[Location]:
    """Related locations worth naming: distinct from the finding's own place, with a file."""
    out: list[Location] = []
    for loc in locations:
        if loc.file and (loc.file, loc.line) != (here.file, here.line) and loc not in out:
            out.append(loc)
    return out
