"""`RunFacts`: what is known about a training run besides its `Policy`.

Every fact may be unknown (None). Rules are predicates over ``(policy, facts)``; a rule whose condition
depends on an unknown fact does not fire as if the fact were known (`Policy.validate()` passes all-unknown
facts; config lint passes what the readers found; the audit what it observed; `PrecisionStep` its own).
Dtypes are canonical names ("bf16"), see `ampdoctor.dtypes`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from ampdoctor.core.model import Location
from ampdoctor.dtypes import HALF

if TYPE_CHECKING:
    from ampdoctor.policy import Policy

# Optimizer kinds that keep small updates of half-precision weights (fp32 master copy, Kahan sums,
# stochastic rounding); a "plain" optimizer updates half weights in place and loses them (pytorch/ao PR #1124).
SAFE_OPTIMIZER_KINDS = frozenset({"master", "kahan", "stochastic-rounding"})
# Optimizers that wrap a plain one and hold fp32 master partitions of half-precision parameters: DeepSpeed's BF16/FP16
# optimizers and ZeRO, Megatron's Float16 optimizers (the "master" kind). Their parameters are half on purpose.
MASTER_OPTIMIZERS = re.compile(r"BF16_Optimizer|FP16_Optimizer|DeepSpeedZeroOptimizer|Float16Optimizer|MixedPrecisionOptimizer|DistributedOptimizer")


@dataclass(frozen=True)
class Device:
    """A device a run uses or a config names: whether it has native bf16 (compute capability >= 8.0, a CPU
    with bf16 instructions), and whether torch reports bf16 support it only emulates (pytorch PR #148322)."""

    name: str
    native_bf16: bool
    emulated_bf16: bool = False
    capability: str | None = None
    reason: str = ""
    location: Location | None = None


@dataclass(frozen=True)
class Conflict:
    """One setting given different values in files that together make one run (SimpleTuner env + json)."""

    setting: str
    values: tuple[str, ...]
    where: tuple[Location, ...]


@dataclass(frozen=True)
class RunFacts:
    # Where the run comes from.
    framework: str | None = None
    framework_version: str | None = None
    # Whether the config is known to be read by `framework`: True where something only that framework has says so (a
    # key no other framework uses, a checkout of it around the file); False where it was recognised by keys other
    # frameworks (or the project's own code) use as well, so what that framework would refuse is conditional.
    framework_known: bool | None = None
    precision_setting: str | None = None  # the framework's own precision value as written ("bf16-true", "bfloat16")
    strategy: str | None = None  # ddp, fsdp, deepspeed, single, auto, other
    # Scale.
    world_size: int | None = None
    devices: tuple[Device, ...] | None = None
    nccl_version: tuple[int, ...] | None = None
    # The training step.
    trains: bool | None = None  # an optimizer steps (False: evaluation, generation, quantization)
    optimizer: str | None = None
    optimizer_kind: str | None = None  # plain, master, kahan, stochastic-rounding
    optimizer_requires: str | None = None  # the dtype an optimizer insists its parameters have
    # The framework casts the parameters to `optimizer_requires` itself (True), lets the optimizer refuse them
    # (False), or its version is unknown and versions differ (None). Readers set it from the framework's own code.
    optimizer_retypes: bool | None = None
    # "optimizer" (fp32 partitions it holds), "params", "none"; "launch": decided by the launch config the run is
    # started with, where the project keeps one that shards with fp32 masters (`lint.configs._launched_with_masters`)
    master_weights: str | None = None
    grad_accum_steps: int | None = None
    adapters_only: bool | None = None  # only adapters (LoRA...) train; PEFT keeps them fp32
    autocast: bool | None = None  # compute reaches its dtype through autocast, not by casting the weights
    loss_scaler_reason: str | None = None  # why a loss scaler is built, when the config says
    # Engines and models.
    engine_precision: str | None = None  # the DeepSpeed engine's mode: bf16, fp16, amp, autocast, fp32
    engine_autocast: bool | None = None  # DeepSpeed torch_autocast enabled
    zero_stage: int | None = None
    half_modes_enabled: tuple[str, ...] | None = None  # precision switches turned on together ("fp16", "bf16")
    requested_precision: str | None = None  # what a launcher asks of the engine config it points at: bf16, fp16, no
    # The launcher asks it by its defaults: the config sets none of its precision keys (an HF arguments file without
    # bf16/fp16), which the command line or the project's code may set for the run instead.
    requested_by_default: bool | None = None
    # The launcher (accelerate, or the HF Trainer through it) switches off the engine file's bf16, written only under the
    # legacy `bfloat16` key: it adds `"bf16": {"enabled": false}` and DeepSpeed reads `bf16` first.
    engine_bf16_ignored: bool | None = None
    # The engine file writes a block (with a value, not "auto") for the half type the launcher asks for: Lightning adds
    # its own block only where the file has no such key, so then it adds none and the file's mode runs.
    asked_block_written: bool | None = None
    # What makes the launcher refuse to start with this config, by the config key at fault: accelerate's launch refuses
    # a YAML that sets `mixed_precision` beside its own `deepspeed_config_file` ("mixed_precision").
    launch_refused: str | None = None
    model_dtype: str | None = None  # the dtype the model is built or loaded in
    model_dtype_declared: bool | None = None  # written in the config (False: derived by the framework)
    # The framework builds the model in the engine's half dtype when the config names no model dtype (True), builds
    # it in fp32 then (False), or its version is unknown (None). Readers set it from the framework's own code.
    model_dtype_from_engine: bool | None = None
    # What the framework does with the config's gradient-precision request: "kept", "dropped" (turned off),
    # "version-dependent" (some versions drop it and the version is unknown); None: no such request or quirk.
    grads_request: str | None = None
    model_name: str | None = None
    quant_compute_dtype: str | None = None  # the dtype 4-bit quantized layers compute in, where the config writes it
    attn_implementation: str | None = None
    eval_dtype: str | None = None  # the dtype the whole model is cast to for evaluation (HF *_full_eval)
    rotary_table_dtype: str | None = None
    max_positions: int | None = None
    tf32: bool | None = None
    conflicts: tuple[Conflict, ...] = ()

    def known(self) -> dict[str, Any]:
        """The facts that are known, by name."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and value != ():
                out[f.name] = value
        return out

    def merged(self, other: "RunFacts") -> "RunFacts":
        """These facts, completed by the known facts of `other` (own known facts win)."""
        return replace(other, **self.known())


FACT_NAMES: frozenset[str] = frozenset(f.name for f in fields(RunFacts))


def half_weights_without_master(policy: "Policy | None", facts: RunFacts) -> bool:
    """Trainable weights in half precision with nothing that keeps their small updates (no fp32 master copy held by
    the optimizer, no Kahan summation or stochastic rounding): asked by the pure-bf16 and the autocast-over-half-
    weights rules alike."""
    return (policy is not None and policy.params in HALF and not facts.adapters_only and facts.trains is not False
            and facts.optimizer_kind not in SAFE_OPTIMIZER_KINDS and facts.master_weights not in ("optimizer", "launch"))
