"""DeepSpeed JSON config -> effective Policy, and Policy -> DeepSpeed config.

Defaults modelled (deepspeed/runtime/engine.py `get_data_types`, config.py):
- a `fp16`/`bf16` block is off unless `"enabled": true`; `bfloat16` is the legacy spelling of `bf16`,
  and old DeeperSpeed/NeoX configs spell bf16 as `"fp16": {"enabled": true, "type": "bfloat16"}`;
- the model is cast to the enabled half dtype, the optimizer keeps an fp32 master copy (unless
  `bf16_master_weights_and_grads`) and fp32 state (unless `bf16_optimizer_states`);
- gradients accumulate in `data_types.grad_accum_dtype`, which defaults to the model dtype, except for bf16
  without ZeRO (stage 0), whose BF16_Optimizer accumulates in fp32;
- collectives run in `communication_data_type`, which follows the model dtype when unset;
- fp16 uses dynamic loss scaling when `loss_scale` is 0 or absent, a static scale otherwise;
  the `loss_scale*` keys of a bf16 block are ignored (bf16 has no loss scaling);
- both fp16 and bf16 enabled is rejected ("bfloat16 and fp16 modes cannot be simultaneously enabled").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from ampdoctor._quote import quoted
from ampdoctor.core.model import Location
from ampdoctor.dtypes import BF16, FP16, FP32
from ampdoctor.facts import RunFacts
from ampdoctor.frameworks.base import PolicyBuilder, Reading, Reference, Setting, as_bool, as_dtype, as_int, is_auto, lower_str
from ampdoctor.frameworks.located import Document
from ampdoctor.frameworks.reader import Reader
from ampdoctor.policy import Policy

NAME = "deepspeed"

DS_KEYS = frozenset({
    "zero_optimization", "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "fp16", "bf16", "bfloat16", "amp", "data_types", "communication_data_type", "gradient_clipping",
    "zero_allow_untested_optimizer", "steps_per_print", "wall_clock_breakdown", "torch_autocast", "activation_checkpointing",
    "flops_profiler", "prescale_gradients", "gradient_predivide_factor", "sparse_attention",
})
_DS_ONLY = frozenset({"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size", "steps_per_print",
                      "wall_clock_breakdown", "zero_allow_untested_optimizer", "communication_data_type", "torch_autocast"})
# The half dtype each engine mode computes in ("amp" is apex AMP at O1/O2: fp16).
ENGINE_DTYPE = {"bf16": BF16, "fp16": FP16, "amp": FP16, "fp32": FP32}


# The value types DeepSpeed takes for its own keys: a file holding those keys with none of them of its type
# (`"train_batch_size": {"value": 5, "min": 1}`, a UI's form defaults) is some other program's, not a broken config.
_DS_ONLY_TYPES: dict[str, tuple[type, ...]] = {
    "zero_optimization": (dict,), "train_micro_batch_size_per_gpu": (int, str), "train_batch_size": (int, str),
    "steps_per_print": (int,), "wall_clock_breakdown": (bool,), "zero_allow_untested_optimizer": (bool,),
    "communication_data_type": (str, type(None)), "torch_autocast": (dict, bool),
}


# A DeepSpeed key that many programs' own hyperparameter files name too (beside `learning_rate`, `seed`, datasets):
# alone, it makes a file DeepSpeed's only where the rest of the file is shaped as DeepSpeed's (`_shaped`).
_SHARED_NAMES = frozenset({"train_batch_size"})
# Blocks of a DeepSpeed config that hold an object with a "type" (`"optimizer": {"type": "AdamW", "params": ...}`).
_TYPED_BLOCKS = ("optimizer", "scheduler")


def detect(doc: Document) -> bool:
    if not isinstance(doc.data, dict):
        return False
    keys = {k for k in doc.data if isinstance(k, str)}
    blocks = [k for k in ("fp16", "bf16", "bfloat16", "amp") if isinstance(doc.data.get(k), dict)]
    own = keys & _DS_ONLY
    if own:
        typed = any(isinstance(doc.data[k], _DS_ONLY_TYPES[k]) for k in own)
        return typed and (bool(own - _SHARED_NAMES) or _shaped(doc.data, keys, blocks))
    return bool(blocks) and len(keys & DS_KEYS) >= 2


def _shaped(data: dict, keys: set[str], blocks: list[str]) -> bool:
    """Is a file whose only DeepSpeed-only key is a shared name (`_SHARED_NAMES`) shaped as DeepSpeed's: a precision
    block that is an object, an optimizer or scheduler block with a "type", or no key DeepSpeed does not read? A
    project's own hyperparameters (`"fp16": 0` beside `learning_rate`, `seed` and its datasets) are not."""
    return bool(blocks) or any(isinstance(data.get(k), dict) and "type" in data[k] for k in _TYPED_BLOCKS) \
        or keys <= DS_KEYS | set(_TYPED_BLOCKS)


@dataclass(frozen=True)
class Mode:
    """Which precision engine DeepSpeed runs: "bf16", "fp16", "amp" (apex), "autocast", "fp32", or None if "auto";
    `enabled` lists every half-precision block switched on (DeepSpeed refuses fp16 and bf16 together)."""

    name: str | None
    location: Location
    enabled: tuple[tuple[str, Location], ...] = ()
    autocast: Location | None = None


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


def precision_mode(doc: Document) -> Mode:
    """The engine's precision mode, every half block switched on, and DeepSpeed's torch_autocast."""
    fp16_on, fp16_at = _enabled(doc, "fp16")
    bf16_block = "bf16" if doc.has("bf16") else "bfloat16"
    bf16_on, bf16_at = _enabled(doc, bf16_block)
    if fp16_on and lower_str(doc.get("fp16", "type")) in ("bfloat16", "bf16"):
        # DeeperSpeed/old NeoX spelling of bf16.
        fp16_on, bf16_on, bf16_at, fp16_at = False, True, fp16_at, None
    amp_on, amp_at = _enabled(doc, "amp")
    auto_on, auto_at = _enabled(doc, "torch_autocast")
    enabled = tuple((name, at) for name, on, at in (("fp16", fp16_on, fp16_at), ("bf16", bf16_on, bf16_at)) if on and at is not None)
    autocast = auto_at if auto_on else None
    for name, on, at in (("bf16", bf16_on, bf16_at), ("fp16", fp16_on, fp16_at), ("amp", amp_on, amp_at), ("autocast", auto_on, auto_at)):
        if on and at is not None:
            return Mode(name, at, enabled, autocast)
    if bf16_on is None or fp16_on is None:
        return Mode(None, (bf16_at if bf16_on is None else fp16_at) or Location(file=doc.file), enabled, autocast)
    return Mode("fp32", bf16_at or fp16_at or Location(file=doc.file), enabled, autocast)


def _engine_facts(doc: Document, cfg: Reading, mode: Mode) -> None:
    cfg.set("engine_precision", mode.name, mode.location)
    cfg.set("half_modes_enabled", tuple(name for name, _ in mode.enabled), mode.location)
    for name, at in mode.enabled:
        cfg.place(f"{name}_mode", at)
    if mode.name == "bf16" and not doc.has("bf16") and doc.has("bfloat16"):
        # The legacy key: DeepSpeed reads it only where no `bf16` key is written (runtime/precision_config.py
        # `get_bfloat16_config`), and a launcher that writes `bf16` beside it (accelerate) switches it off (AMP001).
        cfg.place("legacy_bf16_block", mode.location)
    if mode.autocast is not None:
        cfg.set("engine_autocast", True, mode.autocast)
    stage = as_int(doc.get("zero_optimization", "stage", default=0))
    cfg.set("zero_stage", stage if stage is not None else 0, doc.at("zero_optimization", "stage"), not doc.has("zero_optimization", "stage"))
    gas = doc.get("gradient_accumulation_steps", default=1)
    if not is_auto(gas) and as_int(gas) is not None:
        cfg.set("grad_accum_steps", as_int(gas), doc.at("gradient_accumulation_steps"), not doc.has("gradient_accumulation_steps"))
    micro, total = as_int(doc.get("train_micro_batch_size_per_gpu")), as_int(doc.get("train_batch_size"))
    # Only a written accumulation fixes the world size: without one DeepSpeed derives the accumulation from the world
    # size (train_batch_size = micro * accumulation * ranks), and assuming 1 would state a rank count as a fact.
    steps = cfg.fact("grad_accum_steps") if doc.has("gradient_accumulation_steps") else None
    if micro and total and steps and total % (micro * steps) == 0:
        cfg.set("world_size", total // (micro * steps), doc.at("train_batch_size"))


def _half_engine(doc: Document, b: PolicyBuilder, mode: Mode, reduce_fp32: tuple[bool, Location] | None) -> None:
    """The dtypes of DeepSpeed's fp16/bf16/apex-amp engines (deepspeed/runtime/engine.py)."""
    half = ENGINE_DTYPE[mode.name or ""]
    block = "bf16" if doc.has("bf16") else ("bfloat16" if doc.has("bfloat16") else "fp16")
    master_half = mode.name == "bf16" and bool(as_bool(doc.get(block, "bf16_master_weights_and_grads", default=False)))
    params = half if master_half else FP32
    b.set("params", params, doc.at(block, "bf16_master_weights_and_grads") if master_half else mode.location)
    b.set("compute", half, mode.location)
    b.set("grads", params, mode.location)
    accum_raw = doc.get("data_types", "grad_accum_dtype")
    accum = FP32 if mode.name == "amp" else as_dtype(accum_raw)  # apex amp keeps fp32 params, so .grad is fp32
    if accum is None and mode.name == "bf16" and as_int(doc.get("zero_optimization", "stage", default=0)) == 0:
        # Without ZeRO the bf16 engine runs BF16_Optimizer, which accumulates in fp32 (engine.py `get_data_types`:
        # an unset grad_accum_dtype is fp32 for bf16 without ZeRO; older versions refused bf16 accumulation there).
        accum = FP32
    b.set("grad_accum", accum or half, doc.at("data_types", "grad_accum_dtype") if accum_raw is not None else mode.location)
    _communication(doc, b, mode, half, reduce_fp32)
    opt_half = mode.name == "bf16" and bool(as_bool(doc.get(block, "bf16_optimizer_states", default=False)))
    b.set("optimizer_state", half if opt_half else FP32, doc.at(block, "bf16_optimizer_states") if opt_half else mode.location)
    _loss_scale(doc, b, mode, block)


def _communication(doc: Document, b: PolicyBuilder, mode: Mode, half: str, reduce_fp32: tuple[bool, Location] | None) -> None:
    """`communication_data_type`; unset, DeepSpeed communicates in the engine's dtype (engine.py
    `communication_data_type`), apex amp in fp32; NeoX's `fp32_allreduce` forces fp32."""
    comm_raw = doc.get("communication_data_type")
    comm = as_dtype(comm_raw) if comm_raw is not None else None
    if reduce_fp32 is not None and reduce_fp32[0] and comm is None:
        b.set("reduce", FP32, reduce_fp32[1])
    else:
        b.set("reduce", comm or (FP32 if mode.name == "amp" else half), doc.at("communication_data_type") if comm is not None else mode.location)


def _loss_scale(doc: Document, b: PolicyBuilder, mode: Mode, block: str) -> None:
    """fp16 scales dynamically with `loss_scale` 0 or absent, statically otherwise; bf16 has no loss scaling (the
    `loss_scale*` keys of a bf16 block are ignored)."""
    if mode.name not in ("fp16", "amp"):
        b.set("loss_scale", "none", mode.location)
        return
    scale = doc.get(block if mode.name == "fp16" else "fp16", "loss_scale", default=0)
    static = isinstance(scale, (int, float)) and not isinstance(scale, bool) and scale > 0
    b.set("loss_scale", "static" if static else "dynamic", doc.at("fp16", "loss_scale") if doc.has("fp16", "loss_scale") else mode.location)


def fill_policy(doc: Document, cfg: Reading, *, reduce_fp32: tuple[bool, Location] | None = None) -> None:
    """Set cfg.policy, its sources and the DeepSpeed facts (accumulation, ZeRO stage, world size, engine mode) from `doc`."""
    mode = precision_mode(doc)
    _engine_facts(doc, cfg, mode)
    if mode.name is None:
        cfg.policy = None
        return
    b = PolicyBuilder(mode.location)
    if mode.name == "autocast":
        b.set("params", FP32, mode.location)
        b.set("compute", as_dtype(doc.get("torch_autocast", "dtype", default="bfloat16")) or BF16,
              doc.at("torch_autocast", "dtype") if doc.has("torch_autocast", "dtype") else mode.location)
        b.set("loss_scale", "none", mode.location)
        cfg.set("autocast", True, mode.location)
    elif mode.name in ENGINE_DTYPE and mode.name != "fp32":
        _half_engine(doc, b, mode, reduce_fp32)
        cfg.set("autocast", False, mode.location)  # the engine casts the model: no autocast
    cfg.policy, cfg.sources = b.build()
    # The fp16/bf16 engines keep fp32 master weights in the optimizer (unless bf16_master_weights_and_grads).
    master = cfg.policy.params == FP32 and mode.name in ("bf16", "fp16", "amp")
    cfg.set("optimizer_kind", "master" if master else "plain", mode.location, True)
    if master:
        cfg.set("master_weights", "optimizer", mode.location, True)


def read(doc: Document) -> Reading:
    cfg = Reading(NAME, doc.file)
    fill_policy(doc, cfg)
    cfg.invalid.extend(invalid_values(doc))
    return cfg


# DeepSpeed engine mode -> the launcher precision that asks for it.
_ENGINE_TO_ASKED = {"bf16": "bf16", "fp16": "fp16", "amp": "fp16", "fp32": "no"}


def read_referenced(doc: Document, cfg: Reading, ref: Reference) -> Reading:
    """The DeepSpeed config `ref` points at, read as the pointing framework fills it in (its values for "auto" keys),
    with the pointing config's facts and what it asks of the engine (`requested_precision`)."""
    explicit = precision_mode(doc)
    fills = {}
    for path, value in ref.fills.items():
        if path[0] in ("bf16", "fp16") and explicit.name not in (None, "fp32"):
            continue  # an explicit half mode is never overridden: the launcher refuses or defers (a rule compares)
        current = doc.get(*path, default=None)
        if current is None or is_auto(current) or not doc.has(path[0]):
            fills[path] = value
    target = read(doc.with_overrides(fills))
    target.filled_from = {(loc.file, loc.line): doc.at(*path) for path, (_, loc) in fills.items()}
    target.framework = f"{ref.framework}+deepspeed"
    target.files = tuple(sorted({cfg.file, doc.file}))
    # The pointing config's facts, completed (not overridden) by the engine's own.
    target.settings = {**cfg.settings, **{k: v for k, v in target.settings.items() if not v.default or k not in cfg.settings}}
    target.places = {**cfg.places, **target.places, "reference": ref.location, "engine_file": explicit.location}
    _requested(doc, target, ref, explicit)
    if _legacy_bf16_switched_off(doc, ref, explicit):
        target.settings["engine_bf16_ignored"] = Setting(True, explicit.location)
    return target


def _requested(doc: Document, target: Reading, ref: Reference, explicit: Mode) -> None:
    """What the launcher asks of the engine (`requested_precision`), and whether the file writes the block of the half
    type it asks for (`asked_block_written`: Lightning adds its own block only where there is none)."""
    asked = ref.precision
    # A file without precision blocks gets them from the launcher (accelerate adds the missing block), so only a
    # written block can disagree with what the launcher asks.
    written = any(doc.has(block) for block in ("fp16", "bf16", "bfloat16", "amp"))
    if asked is None or asked.value not in ("bf16", "fp16", "no") or not written or explicit.name not in _ENGINE_TO_ASKED:
        return
    if doc.own_engine_precision is not None:
        return  # the project's code switches the blocks itself (`Document.own_engine_precision`): the file's switch is not what runs
    target.settings["requested_precision"] = Setting(asked.value, asked.location if not asked.default else ref.location, asked.default)
    if asked.default:
        target.settings["requested_by_default"] = Setting(True, ref.location)
    if asked.value in ("bf16", "fp16"):
        mine = doc.has(asked.value) and not is_auto(doc.get(asked.value, "enabled", default=None))
        target.settings["asked_block_written"] = Setting(mine, doc.at(asked.value) if mine else explicit.location)


def _legacy_bf16_switched_off(doc: Document, ref: Reference, explicit: Mode) -> bool:
    """accelerate's `DeepSpeedPlugin.set_mixed_precision` writes `"bf16": {"enabled": <asked is bf16>}` where the file
    has none, and DeepSpeed reads `bf16` before the legacy `bfloat16` (`get_bfloat16_config`): a file whose bf16 is
    written only under `bfloat16`, handed on asking for fp16 or no mixed precision, does not run bf16."""
    asked = ref.precision
    return (asked is not None and asked.value in ("fp16", "no") and ref.framework in _ADDS_BF16_KEY and explicit.name == "bf16"
            and not doc.has("bf16") and doc.has("bfloat16"))


# Launchers that hand a DeepSpeed file on through accelerate's `DeepSpeedPlugin` (accelerate.NAME, hf.NAME: this module
# is imported by theirs).
_ADDS_BF16_KEY = frozenset({"accelerate", "hf-trainer"})


def switched_off(facts: RunFacts, at: Any, setting: str) -> bool:
    """The policy's `setting` (grad_accum, reduce) follows a bf16 block the launcher switches off
    (`engine_bf16_ignored`), not a key of its own (`data_types.grad_accum_dtype`, `communication_data_type`, which
    DeepSpeed honours in any mode; told apart where the reading's places are known): the run does not have it."""
    if not facts.engine_bf16_ignored:
        return False
    return not at.has("legacy_bf16_block") or at(setting) == at("legacy_bf16_block")


_COUNTS = ("gradient_accumulation_steps", "train_micro_batch_size_per_gpu", "train_batch_size")
_DTYPE_KEYS = (("data_types", "grad_accum_dtype"), ("communication_data_type",))


def invalid_values(doc: Document) -> Iterator[tuple[Location, str]]:
    """Values DeepSpeed fails on at start-up (or reads as something else than written), at their keys."""
    for block in ("fp16", "bf16", "bfloat16"):
        if not doc.has(block):
            continue
        value = doc.get(block)
        if not isinstance(value, dict):
            yield doc.at(block), f"`{block}` is {quoted(value)}: DeepSpeed expects an object such as {{\"enabled\": true}} and fails on this at start-up"
        elif "enabled" in value and not is_auto(value["enabled"]) and not isinstance(value["enabled"], bool) and as_bool(value["enabled"]) is None:
            yield doc.at(block, "enabled"), f"`{block}.enabled` is {quoted(value['enabled'])}, not a boolean"
    for key in _COUNTS:
        value = doc.get(key)
        # null is unset: DeepSpeed reads it as the key's absence and derives the count from the other two
        if doc.has(key) and value is not None and not is_auto(value) and (as_int(value) is None or as_int(value) < 1):
            yield doc.at(key), f"`{key}` is {quoted(value)}: DeepSpeed needs a positive integer (or \"auto\" from a launcher)"
    for path in _DTYPE_KEYS:
        value = doc.get(*path)
        if doc.has(*path) and value is not None and not is_auto(value) and as_dtype(value) is None:
            yield doc.at(*path), f"`{'.'.join(path)}` is {quoted(value)}: not a dtype DeepSpeed knows (fp32, fp16, bf16)"


# --- export ------------------------------------------------------------------------------------------

_DS_DTYPE = {FP32: "fp32", BF16: "bf16", FP16: "fp16"}


def export(policy: Policy) -> tuple[dict[str, Any], list[str]]:
    """The DeepSpeed keys that make the engine run `policy`, and what DeepSpeed cannot express."""
    notes: list[str] = []
    config: dict[str, Any] = {}
    compute, params = policy.compute, policy.params
    if compute == BF16:
        block: dict[str, Any] = {"enabled": True}
        if params == BF16:
            block["bf16_master_weights_and_grads"] = True
        elif params != FP32:
            notes.append(f"params={params}: DeepSpeed's bf16 engine keeps fp32 or bf16 master weights only")
        if policy.optimizer_state == BF16:
            block["bf16_optimizer_states"] = True
        config["fp16"] = {"enabled": False}
        config["bf16"] = block
    elif compute == FP16:
        block = {"enabled": True}
        if policy.loss_scale == "dynamic":
            block.update({"loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1})
        elif policy.loss_scale == "static":
            block["loss_scale"] = 1024
        else:
            notes.append("loss_scale=none with fp16 compute: DeepSpeed's fp16 engine always scales the loss (dynamic or static)")
            block["loss_scale"] = 0
        if params != FP32:
            notes.append(f"params={params}: DeepSpeed's fp16 engine always keeps fp32 master weights")
        config["fp16"] = block
        config["bf16"] = {"enabled": False}
    else:
        config["fp16"] = {"enabled": False}
        config["bf16"] = {"enabled": False}
        if compute != FP32:
            notes.append(f"compute={compute}: DeepSpeed trains in fp32, fp16 or bf16 only")
    if compute in (BF16, FP16):
        if policy.grad_accum in _DS_DTYPE:
            config["data_types"] = {"grad_accum_dtype": _DS_DTYPE[policy.grad_accum]}
        if policy.reduce in _DS_DTYPE:
            config["communication_data_type"] = _DS_DTYPE[policy.reduce]
        if policy.output != compute:
            notes.append(f"output={policy.output}: DeepSpeed returns module outputs in the compute dtype; cast in the loss")
    else:
        for name in ("grad_accum", "reduce", "optimizer_state"):
            if getattr(policy, name) != FP32:
                notes.append(f"{name}={getattr(policy, name)}: an fp32 DeepSpeed run keeps it fp32")
    return config, notes


READER = Reader(NAME, detect, read, read_referenced=read_referenced, export=export, syntax="json", label="DeepSpeed")
