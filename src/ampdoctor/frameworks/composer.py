"""MosaicML Composer / llm-foundry run YAML (top-level `precision:` next to `max_duration`, `train_loader`,
`global_train_batch_size`...) -> Policy.

Composer's `precision` (composer/core/precision.py): `amp_bf16` and `amp_fp16` run the forward under autocast over
fp32 weights, `amp_fp16` with a GradScaler; `amp_fp8` runs TransformerEngine's fp8 matmuls inside a bf16 autocast;
`fp32` autocasts nothing. The weights, their gradients and the optimizer state stay fp32 in every mode (FSDP's own
`fsdp_config.mixed_precision` is not read here)."""

from __future__ import annotations

from ampdoctor.dtypes import BF16, FP16, FP32
from ampdoctor.frameworks.base import PolicyBuilder, Reading, lower_str
from ampdoctor.frameworks.located import Document
from ampdoctor.frameworks.reader import Reader

NAME = "composer"
# Composer's precision values and the dtype each autocasts to (None: no autocast).
PRECISIONS: dict[str, str | None] = {"fp32": None, "amp_fp16": FP16, "amp_bf16": BF16, "amp_fp8": BF16}
# Keys of a Composer/llm-foundry run config besides `precision` (a bare `precision:` is every framework's word).
_RUN_KEYS = frozenset({"max_duration", "train_loader", "global_train_batch_size", "device_train_microbatch_size",
                       "device_eval_batch_size", "fsdp_config", "eval_interval", "save_interval", "icl_tasks"})


def detect(doc: Document) -> bool:
    if not isinstance(doc.data, dict) or lower_str(doc.data.get("precision")) not in PRECISIONS:
        return False
    return bool(_RUN_KEYS & {k for k in doc.data if isinstance(k, str)})


def read(doc: Document) -> Reading:
    cfg = Reading(NAME, doc.file)
    raw = doc.get("precision")
    at = doc.at("precision")
    precision = lower_str(raw)
    cfg.set("precision_setting", str(raw), at)
    if not (doc.has("train_loader") or doc.has("max_duration")):
        cfg.set("trains", False, at)  # an evaluation config (`icl_tasks`, `device_eval_batch_size`) trains nothing
    if precision not in PRECISIONS:
        return cfg  # Composer refuses the value
    b = PolicyBuilder(at)
    b.set("params", FP32, at)
    half = PRECISIONS[precision]
    if half is None:
        b.set("compute", FP32, at)
        cfg.set("autocast", False, at)
    else:
        b.autocast(cfg, half, at)
    cfg.policy, cfg.sources = b.build()
    cfg.set("optimizer_kind", "master" if half is not None else "plain", at, True)
    return cfg


READER = Reader(NAME, detect, read, label="Composer")
