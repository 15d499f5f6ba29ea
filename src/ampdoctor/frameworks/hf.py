"""HF TrainingArguments as JSON/YAML (also TRL/axolotl-style files that add model-loading keys) -> Policy.

- `bf16`/`fp16` turn on autocast; fp16 also a GradScaler (Trainer: `do_grad_scaling = amp_dtype == fp16`);
  both true is refused by TrainingArguments.
- The parameter dtype is whatever the model was loaded in: `torch_dtype`/`dtype` (TRL ModelConfig), fp32 if
  unset, unless the project's own loading code gives `torch_dtype` a half default (`Document.own_load_default`: a
  trainer's `torch_dtype="bfloat16"` parameter, an argument dataclass's field): then unset says nothing.
  TrainingArguments has none of these keys: one that the project's own TrainingArguments subclass declares
  (`Document.own_keys`) means what the project's code makes of it (a switch for mixed precision, say), not a load
  dtype, and is not read as one. PEFT adapters (`use_peft`, `lora_r`, axolotl `adapter: lora`) are upcast to fp32 by PEFT >= 0.11.
- `deepspeed` (a path or an inline dict): the Trainer fills the DeepSpeed "auto" values from these arguments
  and refuses explicit ones that disagree ("Please correct the following DeepSpeed config values that
  mismatch TrainingArguments values"); the DeepSpeed engine then decides the dtypes.
- `fsdp` (axolotl: also an `fsdp_config` block): the accelerate FSDP plugin reduces gradients in the
  mixed-precision dtype, and with mixed precision on, accelerate upcasts trainable half parameters to fp32
  (axolotl's FSDP2 preparation, which replaces accelerate's, does not).
- A file of model-loading and generation keys with no key of the training loop (a sampling or dataset-filtering
  config beside the training recipes) is not read: it trains nothing.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from pathlib import Path
from typing import Any

from ampdoctor._quote import quoted
from ampdoctor.core.model import Location
from ampdoctor.dtypes import BF16, FP16, FP32, FP64
from ampdoctor.frameworks.base import (
    PolicyBuilder,
    Reading,
    Reference,
    Setting,
    as_bool,
    as_dtype,
    as_int,
    as_path_value,
    first_file,
    is_auto,
    lower_str,
    resolve_path,
)
from ampdoctor.frameworks.located import Document
from ampdoctor.frameworks.reader import Reader
from ampdoctor.policy import Policy

NAME = "hf-trainer"

_ARGS = frozenset({
    "output_dir", "per_device_train_batch_size", "per_device_eval_batch_size", "learning_rate", "num_train_epochs",
    "gradient_accumulation_steps", "logging_steps", "save_steps", "eval_strategy", "evaluation_strategy", "save_strategy",
    "lr_scheduler_type", "warmup_ratio", "warmup_steps", "weight_decay", "bf16", "fp16", "deepspeed", "report_to", "optim",
    "gradient_checkpointing", "max_steps", "seed", "tf32", "bf16_full_eval", "fp16_full_eval", "model_name_or_path",
    "torch_dtype", "attn_implementation", "micro_batch_size", "base_model", "flash_attention", "adapter", "fsdp",
    "half_precision_backend", "max_grad_norm", "logging_dir", "overwrite_output_dir", "do_train", "do_eval",
})
# The keys a model-loading config writes the load dtype in (TRL's ModelConfig and axolotl-style files); not
# TrainingArguments fields.
MODEL_DTYPE_KEYS = ("torch_dtype", "dtype", "model_dtype")
_PRECISION_FLAGS = ("bf16", "fp16", "bf16_full_eval", "fp16_full_eval", "tf32", "torch_dtype", "deepspeed", "half_precision_backend")
# Keys that set up the training loop or its optimizer: a file of model-loading and generation keys alone (a
# sampling or dataset-filtering config) loads a model but trains nothing, so it sets no training precision.
_TRAINING = frozenset({
    "per_device_train_batch_size", "learning_rate", "num_train_epochs", "gradient_accumulation_steps", "lr_scheduler_type",
    "warmup_ratio", "warmup_steps", "weight_decay", "bf16", "fp16", "deepspeed", "optim", "gradient_checkpointing",
    "max_steps", "micro_batch_size", "fsdp", "half_precision_backend", "max_grad_norm", "do_train", "save_steps",
    "save_strategy",
})


# What a transformers model config (the `config.json` saved beside the weights) carries and no training config does.
# Some models keep `bf16`/`fp16` flags and a `torch_dtype` in it (Qwen-1): the model's own, not training arguments.
_MODEL_CONFIG_KEYS = frozenset({"architectures", "transformers_version", "auto_map"})


def is_model_config(doc: Document) -> bool:
    """A transformers model config, which configures no training run."""
    return isinstance(doc.data, dict) and any(k in doc.data for k in _MODEL_CONFIG_KEYS)


def detect(doc: Document) -> bool:
    if not isinstance(doc.data, dict) or is_model_config(doc):
        return False
    keys = {k for k in doc.data if isinstance(k, str)}
    if any(isinstance(doc.data.get(k), dict) for k in ("bf16", "fp16")):
        return False  # DeepSpeed blocks
    return len(keys & _ARGS) >= 3 and bool(keys & set(_PRECISION_FLAGS) | keys & {"per_device_train_batch_size", "micro_batch_size"}) \
        and bool(keys & _TRAINING)


def _flag(doc: Document, key: str) -> bool | None:
    """A boolean argument; axolotl's `bf16: auto` means "bf16 if the GPU has it": None (unknown)."""
    value = doc.get(key, default=False)
    return None if is_auto(value) else bool(as_bool(value))


def _fsdp_key(doc: Document) -> str | None:
    """The key that turns FSDP on: TrainingArguments' `fsdp` (its `fsdp_config` alone does not), or for axolotl
    either `fsdp` or an `fsdp_config` block."""
    if doc.get("fsdp"):
        return "fsdp"
    if is_axolotl(doc) and doc.get("fsdp_config"):
        return "fsdp_config"
    return None


def _fsdp_upcasts(doc: Document) -> bool:
    """accelerate's FSDP preparation (FSDP1 and FSDP2) upcasts trainable half parameters to fp32 when mixed precision
    is on; axolotl replaces accelerate's FSDP2 preparation with its own (`fsdp_version: 2`, at the top level or in the
    `fsdp_config` block), which upcasts nothing."""
    if not is_axolotl(doc):
        return True
    version = doc.get("fsdp_version")
    if version is None:
        version = doc.get("fsdp_config", "fsdp_version", default=doc.get("fsdp_config", "version"))
    return str(version) != "2"


def is_axolotl(doc: Document) -> bool:
    """An axolotl config: a base model, its datasets and a micro-batch size or sequence length."""
    return doc.has("base_model") and (doc.has("datasets") or doc.has("micro_batch_size") or doc.has("sequence_len"))


def _axolotl_dtype(doc: Document) -> tuple[Any, Location]:
    """axolotl loads the model in the training precision (`resolve_dtype`: bf16 -> bfloat16; fp16, float16 or
    load_in_8bit -> float16; else float32), whatever `torch_dtype` says; `bf16: auto` is decided by the GPU."""
    bf16, fp16 = doc.get("bf16"), doc.get("fp16")
    if is_auto(bf16) and not as_bool(fp16):
        return "auto", doc.at("bf16")
    if as_bool(bf16) or as_bool(doc.get("bfloat16")):
        return "bf16", doc.at("bf16")
    if as_bool(fp16) or as_bool(doc.get("float16")) or as_bool(doc.get("load_in_8bit")):
        return "fp16", doc.at("fp16") if doc.has("fp16") else doc.at("load_in_8bit")
    return "fp32", Location(file=doc.file, label="bf16/fp16 unset: fp32")


def _load_dtype_key(doc: Document) -> str | None:
    """The key the config writes the model's load dtype in; one the project's own argument class declares is not."""
    return next((k for k in MODEL_DTYPE_KEYS if doc.has(k) and k not in doc.own_keys), None)


def _model_facts(doc: Document, cfg: Reading) -> tuple[str | None, Any, Location]:
    """The model-loading arguments: (dtype the model is loaded in, the raw value, where)."""
    model_key = _load_dtype_key(doc)
    model_raw = doc.get(model_key) if model_key else None
    model_at = doc.at(model_key) if model_key else Location(file=doc.file, label="torch_dtype unset: fp32")
    if is_axolotl(doc):
        model_raw, model_at = _axolotl_dtype(doc)
        model_key = "bf16"
    elif model_key is None and doc.own_load_default:
        # The project's own loader takes the load dtype with a half default (`own_load_default`): unset here, the
        # model is loaded in whatever that code is handed, which this file does not say.
        model_raw = "auto"
        model_at = Location(file=doc.file, label=f"torch_dtype unset: the project's loader defaults it to half ({doc.own_load_default})")
    model_dtype = as_dtype(model_raw) if model_raw is not None and not is_auto(model_raw) else (None if model_raw is not None else FP32)
    if model_dtype is not None:
        cfg.set("model_dtype", model_dtype, model_at, model_key is None)
    adapters = bool(as_bool(doc.get("use_peft", default=False))) or as_int(doc.get("lora_r")) is not None \
        or lower_str(doc.get("adapter")) in ("lora", "qlora") or doc.has("peft_config")
    adapter_key = next((k for k in ("use_peft", "adapter", "lora_r", "peft_config") if doc.has(k)), "use_peft")
    cfg.set("adapters_only", adapters, doc.at(adapter_key))
    attn = lower_str(doc.get("attn_implementation"))
    if attn:
        cfg.set("attn_implementation", attn, doc.at("attn_implementation"))
    elif as_bool(doc.get("flash_attention")):
        cfg.set("attn_implementation", "flash_attention_2", doc.at("flash_attention"))
    _quant_compute(doc, cfg)
    name = doc.get("model_name_or_path") or doc.get("base_model")
    if isinstance(name, str):
        cfg.set("model_name", name, doc.at("model_name_or_path") if doc.has("model_name_or_path") else doc.at("base_model"))
    return model_dtype, model_raw, model_at


# Where a config writes the compute dtype of bitsandbytes 4-bit layers: top level, an inline quantization_config,
# or axolotl's `bnb_config_kwargs` (which overrides the torch_dtype axolotl passes by default).
_QUANT_COMPUTE_PATHS = (("bnb_4bit_compute_dtype",), ("quantization_config", "bnb_4bit_compute_dtype"),
                        ("bnb_config_kwargs", "bnb_4bit_compute_dtype"))


def _quant_compute(doc: Document, cfg: Reading) -> None:
    for path in _QUANT_COMPUTE_PATHS:
        if doc.has(*path):
            dtype = as_dtype(doc.get(*path))
            if dtype is not None:
                cfg.set("quant_compute_dtype", dtype, doc.at(*path))
            return


def _training_facts(doc: Document, cfg: Reading, bf16: bool | None, fp16: bool | None) -> int | None:
    modes = [(name, on) for name, on in (("fp16", fp16), ("bf16", bf16)) if on]
    cfg.set("half_modes_enabled", tuple(name for name, _ in modes), doc.at("bf16") if bf16 else doc.at("fp16"))
    for name, _ in modes:
        cfg.place(f"{name}_mode", doc.at(name))
    gas = as_int(doc.get("gradient_accumulation_steps", default=1))
    if gas is not None:
        cfg.set("grad_accum_steps", gas, doc.at("gradient_accumulation_steps"), not doc.has("gradient_accumulation_steps"))
    if as_bool(doc.get("do_train")) is False and (as_bool(doc.get("do_eval")) or as_bool(doc.get("do_predict"))):
        cfg.set("trains", False, doc.at("do_train"))  # an evaluation/prediction run: no optimizer steps
    optim = lower_str(doc.get("optim", default="adamw_torch"))
    cfg.set("optimizer", optim, doc.at("optim"), not doc.has("optim"))
    cfg.set("optimizer_kind", "kahan" if "anyprecision" in optim else "plain", doc.at("optim"), not doc.has("optim"))
    if as_bool(doc.get("tf32")):
        cfg.set("tf32", True, doc.at("tf32"))
    for key, dtype in (("fp16_full_eval", FP16), ("bf16_full_eval", BF16)):
        if as_bool(doc.get(key)):
            cfg.set("eval_dtype", dtype, doc.at(key))
    return gas


def _own_deepspeed_switch(doc: Document, cfg: Reading) -> bool:
    """A `deepspeed` key the project declares as its own option and hands to `deepspeed.initialize` itself
    (`Document.own_keys`): the Trainer's checks see it only if the project also passes it on, so what they would
    refuse is conditional (`framework_known`). True where it is a switch, not a file (DeepSpeed's `--deepspeed`
    flag): nothing for the Trainer to read."""
    if "deepspeed" not in doc.own_keys or not doc.get("deepspeed"):
        return False
    cfg.set("framework_known", False, doc.at("deepspeed"))
    return not isinstance(doc.get("deepspeed"), (str, dict))


def _deepspeed_reference(doc: Document, cfg: Reading, bf16: bool | None, fp16: bool | None, gas: int | None) -> bool:
    """HF `deepspeed` (a path or an inline dict): the Trainer fills the file's "auto" values from the arguments and
    refuses explicit ones that disagree, even with bf16/fp16 left at their default false."""
    ds = doc.get("deepspeed")
    if not ds:
        return False
    fills: dict[tuple[str, ...], tuple[Any, Location]] = {}
    if bf16 is not None:
        fills[("bf16", "enabled")] = (bool(bf16) or bool(as_bool(doc.get("bf16_full_eval"))), doc.at("bf16"))
    if fp16 is not None:
        fills[("fp16", "enabled")] = (bool(fp16) or bool(as_bool(doc.get("fp16_full_eval"))), doc.at("fp16"))
    if gas is not None:
        fills[("gradient_accumulation_steps",)] = (gas, doc.at("gradient_accumulation_steps"))
    micro = as_int(doc.get("per_device_train_batch_size"))
    if micro is not None:
        fills[("train_micro_batch_size_per_gpu",)] = (micro, doc.at("per_device_train_batch_size"))
    asked = "bf16" if bf16 else "fp16" if fp16 else ("no" if bf16 is not None and fp16 is not None else None)
    at = doc.at("bf16") if bf16 else doc.at("fp16") if fp16 else Location(file=doc.file)
    precision = Setting(asked, at, not (bf16 or fp16)) if asked else None
    inline, problem = (doc.sub("deepspeed"), None) if isinstance(ds, dict) else _deepspeed_string(doc, ds)
    if inline is not None:
        cfg.references.append(Reference(Path(doc.file), doc.at("deepspeed"), fills, precision, NAME, inline=inline))
        return True
    if problem is not None:
        cfg.invalid.append((doc.at("deepspeed"), problem))
        return True
    value = as_path_value(ds)
    if value is None:
        cfg.invalid.append((doc.at("deepspeed"), f"`deepspeed` is {type(ds).__name__} {quoted(ds, 40)}: the Trainer takes a file "
                            "path, a dict, or a JSON or base64-encoded JSON string"))
        return True
    cfg.references.append(Reference(first_file(resolve_path(doc.file, value)), doc.at("deepspeed"), fills, precision, NAME))
    return True


_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")


def _deepspeed_string(doc: Document, value: Any) -> tuple[Document | None, str | None]:
    """A `deepspeed` string as the Trainer reads it when it is not a file: `TrainingArguments` parses a value that
    starts with "{" as JSON, and `HfDeepSpeedConfig` decodes one that is not an existing file as base64 JSON.
    (the inline config as a document located at the `deepspeed` key, None) for those; (None, why) for a value the
    Trainer refuses at start-up; (None, None) for a file path (followed, or reported not found, by lint)."""
    if not isinstance(value, str):
        return None, None
    text = value.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            return None, f"`deepspeed` starts with '{{' but is not valid JSON ({exc}): the Trainer's json.loads fails at start-up"
        return _inline_document(doc, data), None
    path = as_path_value(value)
    if path is not None and _is_file(first_file(resolve_path(doc.file, path))):
        return None, None
    if _BASE64.fullmatch(text):
        try:
            decoded = json.loads(base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True).decode("utf-8"))
        except (binascii.Error, ValueError):
            decoded = None
        if isinstance(decoded, dict):
            return _inline_document(doc, decoded), None
    if path is None:
        why = "contains a NUL byte" if "\x00" in value else f"is {len(value)} characters long" if value.strip() else "is blank"
        return None, f"`deepspeed` {why}: not a usable file path, and not inline JSON or base64-encoded JSON either"
    return None, None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long for the file system
        return False


def _inline_document(doc: Document, data: Any) -> Document | None:
    """A DeepSpeed config written as a string inside `doc`: every key is located at the `deepspeed` key."""
    if not isinstance(data, dict):
        return None
    at = doc.at("deepspeed")
    locations: dict[tuple, Location] = {}
    todo: list[tuple[tuple, Any]] = [((), data)]
    while todo:
        prefix, node = todo.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in items:
            locations[(*prefix, key)] = at
            todo.append(((*prefix, key), child))
    return Document(doc.file, "json", data, locations)


def read(doc: Document) -> Reading:
    cfg = Reading(NAME, doc.file)
    bf16, fp16 = _flag(doc, "bf16"), _flag(doc, "fp16")
    model_dtype, model_raw, model_at = _model_facts(doc, cfg)
    gas = _training_facts(doc, cfg, bf16, fp16)
    if _own_deepspeed_switch(doc, cfg) or _deepspeed_reference(doc, cfg, bf16, fp16, gas):
        return cfg
    if bf16 is None or fp16 is None or (model_raw is not None and model_dtype is None):
        return cfg  # "auto": decided on the machine, not in the file
    half = BF16 if bf16 else FP16 if fp16 else None
    half_at = doc.at("bf16") if bf16 else doc.at("fp16")
    fsdp = _fsdp_key(doc)
    params, params_at = FP32 if cfg.fact("adapters_only") else model_dtype, model_at
    if fsdp is not None and half is not None and params in (BF16, FP16) and _fsdp_upcasts(doc):
        # accelerate's FSDP preparation upcasts trainable low-precision parameters to fp32 whenever mixed
        # precision is on (FSDP's own param_dtype does the compute cast): the optimizer steps fp32 masters.
        params, params_at = FP32, doc.at(fsdp)
    b = PolicyBuilder(half_at if half else model_at)
    b.set("params", params, params_at)
    if half is not None:
        b.autocast(cfg, half, half_at)
    else:
        b.set("loss_scale", "none", model_at)  # the Trainer scales the loss only for fp16=true
        cfg.set("autocast", False, model_at)
    for name in ("grads", "grad_accum", "reduce", "optimizer_state"):
        b.set(name, params, model_at)
    if fsdp is not None:
        # accelerate's FSDP plugin reduces in the mixed-precision dtype.
        b.set("reduce", half or params, doc.at(fsdp))
    cfg.policy, cfg.sources = b.build()
    return cfg


def export(policy: Policy) -> tuple[dict[str, Any], list[str]]:
    notes: list[str] = []
    config: dict[str, Any] = {"bf16": policy.compute == BF16, "fp16": policy.compute == FP16}
    if policy.params != FP32:
        # A model-loading argument (TRL ModelConfig, from_pretrained), read from the same file by TRL scripts.
        config["torch_dtype"] = {BF16: "bfloat16", FP16: "float16", FP64: "float64"}[policy.params]
    if policy.compute == policy.params and policy.compute != FP32 and policy.compute in (BF16, FP16):
        config["bf16" if policy.compute == BF16 else "fp16"] = False  # a cast model needs no autocast
    for name in ("grads", "grad_accum", "reduce", "optimizer_state"):
        if getattr(policy, name) != policy.params:
            notes.append(f"{name}={getattr(policy, name)}: under the Trainer (DDP) it follows the parameter dtype ({policy.params})")
    expected_scale = "dynamic" if config["fp16"] else "none"
    if policy.loss_scale != expected_scale:
        notes.append(f"loss_scale={policy.loss_scale}: the Trainer uses a dynamic GradScaler exactly when fp16=true")
    if policy.compute not in (BF16, FP16, policy.params):
        notes.append(f"compute={policy.compute}: the Trainer autocasts to bf16 or fp16 only")
    return config, notes


READER = Reader(NAME, detect, read, export=export, syntax="json", key="hf", launched_by=("accelerate",))
