"""SimpleTuner: `config.env` (exported shell variables, `TRAINER_EXTRA_ARGS="--flag=value ..."`) and
`config.json`/`config.yaml` (`{"--flag": value}`) -> Policy.

SimpleTuner loads the trained model in `weight_dtype`, which `--mixed_precision` decides (bf16 by default),
so even LoRA weights are bf16 (incident 3: "Flux transformer moved to GPU in torch.bfloat16").
`--gradient_precision=fp32` casts every `.grad` to fp32 after backward (bghira/SimpleTuner #854 reported "Expected
BFloat16, got Float" with gradient accumulation; on torch 2.13 the accumulation runs, and the step of torch's Adam
family fails on the bf16 parameter with its fp32 gradient, while `adamw_bf16` takes it: AMP003). Since commit 26ee784 (Sep 2024) SimpleTuner's argument parser turns `fp32` into
`unmodified` unless the optimizer asks for fp32 gradients, so the flag no longer does this: which one runs is read
from the checkout a config lives in, and is unknown elsewhere. `adamw_bf16` asserts bf16 parameters (#755).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from ampdoctor.core.model import Location
from ampdoctor.dtypes import BF16, FP16, FP32
from ampdoctor.facts import Conflict
from ampdoctor.frameworks.base import PolicyBuilder, Reading, as_int, checkout_says, lower_str
from ampdoctor.frameworks.located import Document
from ampdoctor.frameworks.reader import Reader
from ampdoctor.report import ReportError

NAME = "simpletuner"

_ENV_VARS = frozenset({"MIXED_PRECISION", "TRAINER_EXTRA_ARGS", "PRETRAINED_MODEL_NAME_OR_PATH", "MODEL_TYPE", "MODEL_FAMILY",
                       "OUTPUT_DIR", "LEARNING_RATE", "GRADIENT_ACCUMULATION_STEPS", "ACCUMULATE_STEPS", "MAX_NUM_STEPS",
                       "TRAIN_BATCH_SIZE", "OPTIMIZER", "DATALOADER_CONFIG", "RESOLUTION", "VALIDATION_PROMPT",
                       "CHECKPOINTING_STEPS", "LR_SCHEDULE", "BASE_MODEL_PRECISION", "TRACKER_PROJECT_NAME", "NUM_EPOCHS"})
_FLAGS = frozenset({"model_type", "model_family", "mixed_precision", "pretrained_model_name_or_path", "output_dir",
                    "data_backend_config", "gradient_precision", "optimizer", "train_batch_size", "lora_type",
                    "base_model_precision", "gradient_accumulation_steps", "learning_rate", "max_train_steps"})
_ENV_ALIASES = {"accumulate_steps": "gradient_accumulation_steps"}
_HALF = {"bf16": BF16, "fp16": FP16, "fp8": BF16}
# Optimizers that handle bf16 weights without fp32 masters.
_SAFE_OPTIMIZERS = ("adamw_bf16", "optimi-", "stableadamw", "adamw_schedulefree", "bnb-", "ao-")


# The argument code of a SimpleTuner checkout (its layouts over time), and what it does to `--gradient_precision=fp32`
# since 26ee784: `if args.gradient_precision == "fp32": args.gradient_precision = "unmodified"`.
_ARGUMENT_CODE = (Path("simpletuner", "helpers", "configuration", "cmd_args.py"), Path("helpers", "configuration", "cmd_args.py"),
                  Path("helpers", "arguments.py"))
_DROPS_FP32_GRADS = re.compile(r"""gradient_precision\s*==\s*["']fp32["']\s*:\s*\n\s*\w+\.gradient_precision\s*=\s*["']unmodified["']""")
# Before it, the flag was defined and never set to anything but fp32 (the old code re-set it to "fp32" itself).
_DEFINES_FLAG = re.compile(r"""["']--gradient_precision["']""")
_SETS_FLAG = re.compile(r"""\.gradient_precision\s*=(?!=)\s*(?P<value>\S+)""")


def checkout_drops_fp32_grads(config_file: str) -> tuple[bool | None, Location | None]:
    """Whether the SimpleTuner checkout the config lives in turns `--gradient_precision=fp32` off: True where its
    argument code does, False only where that code defines the flag and never sets it away from fp32 (the old
    behaviour), and (None, None) otherwise — code that says it in other words, or no checkout: the version is
    unknown, not old."""
    return checkout_says(config_file, _ARGUMENT_CODE, "SimpleTuner argument code", lambda text: bool(_DROPS_FP32_GRADS.search(text)),
                          lambda text: bool(_DEFINES_FLAG.search(text)) and all(m["value"].strip("\"'") == "fp32" for m in _SETS_FLAG.finditer(text)))


# The trainer of a SimpleTuner checkout, and what it does with `adamw_bf16` over weights that are not bf16: since
# 774279e (Oct 2025) it casts the trained parameters to bf16 first (`_ensure_parameter_dtype(..., torch.bfloat16)`);
# before, the optimizer's step asserted them ("only bfloat 16 is supported", #755).
_TRAINER_CODE = (Path("simpletuner", "helpers", "training", "trainer.py"), Path("helpers", "training", "trainer.py"))
_RETYPES_FOR_ADAMW_BF16 = re.compile(r"""_ensure_parameter_dtype\([^)]*torch\.bfloat16""")
# The older trainer: it knows the option, without the optimizer class 774279e imports with the cast.
_KNOWS_ADAMW_BF16 = re.compile(r"""enable_adamw_bf16""")
_NEWER_IMPORT = re.compile(r"""AdamWBF16""")


def checkout_retypes_for_adamw_bf16(config_file: str) -> tuple[bool | None, Location | None]:
    """Whether the SimpleTuner checkout the config lives in casts the trained weights to bf16 for `adamw_bf16`: True
    where its trainer does, False where its trainer builds that optimizer without it (the old behaviour), and
    (None, None) otherwise (no checkout, or code that says it in other words: the version is unknown)."""
    return checkout_says(config_file, _TRAINER_CODE, "SimpleTuner trainer code", lambda text: bool(_RETYPES_FOR_ADAMW_BF16.search(text)),
                          lambda text: bool(_KNOWS_ADAMW_BF16.search(text)) and not _NEWER_IMPORT.search(text))


def detect(doc: Document) -> bool:
    if not isinstance(doc.data, dict):
        return False
    if doc.syntax == "env":
        names = set(doc.data)
        return len(names & _ENV_VARS) >= 2 and bool(names & {"MIXED_PRECISION", "TRAINER_EXTRA_ARGS"})
    flags = {k[2:].replace("-", "_") for k in doc.data if isinstance(k, str) and k.startswith("--")}
    return len(flags) >= 2 and bool(flags & _FLAGS)


def flags(doc: Document) -> dict[str, tuple[Any, Location]]:
    """Every SimpleTuner option the document sets, by flag name, with where it is written."""
    out: dict[str, tuple[Any, Location]] = {}
    if doc.syntax != "env":
        for key, value in doc.data.items():
            if isinstance(key, str) and key.startswith("--"):
                out[key[2:].replace("-", "_")] = (value, doc.at(key))
        return out
    for name, value in doc.data.items():
        if name == "TRAINER_EXTRA_ARGS":
            continue
        flag = _ENV_ALIASES.get(name.lower(), name.lower())
        out[flag] = (value, doc.at(name))
    extra = doc.data.get("TRAINER_EXTRA_ARGS")
    if isinstance(extra, str):
        out.update(_extra_args(extra, doc))
    return out


def _extra_args(text: str, doc: Document) -> dict[str, tuple[Any, Location]]:
    try:
        tokens = shlex.split(text)
    except ValueError:
        tokens = text.split()
    base = doc.at("TRAINER_EXTRA_ARGS")
    out: dict[str, tuple[Any, Location]] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--"):
            name, sep, value = token[2:].partition("=")
            if not sep:
                if i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                    value, i = tokens[i + 1], i + 1
                else:
                    value = "true"
            out[name.replace("-", "_")] = (value, _locate(doc, base, token.split("=")[0]))
        i += 1
    return out


def _locate(doc: Document, base: Location, needle: str) -> Location:
    """The line/column of a flag inside a (possibly multi-line) variable value."""
    if not doc.text or base.line is None:
        return base
    lines = doc.text.splitlines()
    for n in range(base.line - 1, min(len(lines), base.line + 50)):
        match = re.search(re.escape(needle) + r"(?=[=\s\"']|$)", lines[n])
        if match:
            return Location(file=doc.file, line=n + 1, column=match.start() + 1)
    return base


def read(doc: Document) -> Reading:
    return read_flags(flags(doc), doc.file)


def read_flags(opts: dict[str, tuple[Any, Location]], file: str) -> Reading:
    cfg = Reading(NAME, file)
    here = Location(file=file)
    mp_raw, mp_at = opts.get("mixed_precision", ("bf16", Location(file=file, label="mixed_precision unset: bf16")))
    mp = lower_str(mp_raw) or "bf16"
    cfg.set("precision_setting", mp, mp_at, "mixed_precision" not in opts)
    weight = _HALF.get(mp, FP32)
    gas_raw, gas_at = opts.get("gradient_accumulation_steps", (1, here))
    gas = as_int(gas_raw) or 1
    cfg.set("grad_accum_steps", gas, gas_at, "gradient_accumulation_steps" not in opts)
    grad_raw, grad_at = opts.get("gradient_precision", ("unmodified", here))
    grads = FP32 if lower_str(grad_raw) == "fp32" else weight
    if grads != weight:
        drops, where = checkout_drops_fp32_grads(file)
        if drops is not None and where is not None:
            cfg.set("grads_request", "dropped" if drops else "kept", where)
        else:
            cfg.set("grads_request", "version-dependent", grad_at)
        if drops:
            grads = weight  # this SimpleTuner turns the flag off: `.grad` stays in the weights' dtype
    optimizer_raw, optimizer_at = opts.get("optimizer", ("adamw_bf16", here))
    optimizer = lower_str(optimizer_raw) or "adamw_bf16"
    cfg.set("optimizer", optimizer, optimizer_at, "optimizer" not in opts)
    cfg.set("optimizer_kind", "stochastic-rounding" if optimizer.startswith(_SAFE_OPTIMIZERS) else "plain", optimizer_at, "optimizer" not in opts)
    if optimizer == "adamw_bf16":
        cfg.set("optimizer_requires", BF16, optimizer_at)
        if weight != BF16:
            retypes, where = checkout_retypes_for_adamw_bf16(file)
            if retypes is not None and where is not None:
                cfg.set("optimizer_retypes", retypes, where)
    name_raw = opts.get("pretrained_model_name_or_path")
    if name_raw and isinstance(name_raw[0], str):
        cfg.set("model_name", name_raw[0], name_raw[1])
    b = PolicyBuilder(mp_at)
    b.set("params", weight, mp_at)
    b.set("compute", weight, mp_at)
    grad_src = grad_at if grads != weight else mp_at  # the flag only matters where it changes the dtype
    b.set("grads", grads, grad_src)
    # .grad is summed across micro-batches in its own dtype.
    b.set("grad_accum", grads, grad_src)
    b.set("reduce", grads, grad_src)
    b.set("optimizer_state", FP32 if optimizer.startswith(_SAFE_OPTIMIZERS) else weight, optimizer_at)
    # SimpleTuner loads the model in weight_dtype and also autocasts to it (accelerate's mixed_precision).
    cfg.set("autocast", weight != FP32, mp_at)
    cfg.policy, cfg.sources = b.build()
    return cfg


def read_group(docs: list[Document], errors: list[ReportError]) -> list[Reading]:
    """config.env and config.json of one SimpleTuner run are one set of options; a precision given differently
    in two of them is a conflict (which one SimpleTuner reads depends on CONFIG_BACKEND)."""
    opts: dict[str, tuple[Any, Location]] = {}
    conflicts: list[Conflict] = []
    for doc in sorted(docs, key=lambda d: d.syntax != "env"):
        for name, (value, loc) in flags(doc).items():
            earlier = opts.get(name)
            if name == "mixed_precision" and earlier is not None and str(earlier[0]).lower() != str(value).lower() and earlier[1].file != loc.file:
                conflicts.append(Conflict(name, (str(value), str(earlier[0])), (loc, earlier[1])))
            opts[name] = (value, loc)
    cfg = read_flags(opts, docs[0].file)
    cfg.files = tuple(sorted({d.file for d in docs}))
    if conflicts:
        cfg.set("conflicts", tuple(conflicts), conflicts[0].where[0])
    return [cfg]


READER = Reader(NAME, detect, read, read_group=read_group, label="SimpleTuner")
