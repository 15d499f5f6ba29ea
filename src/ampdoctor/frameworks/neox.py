"""GPT-NeoX YAML configs (several files merged as `deepy.py train.py a.yml b.yml` merges them) -> Policy.

NeoX builds its model in `params_dtype`, derived from `precision`, while the DeepSpeed engine inside runs
whatever the `fp16`/`bf16` blocks say. Before EleutherAI/gpt-neox PR #1311, an unset `precision` was derived
from the fp16 block only (bf16 only for `fp16.type: bfloat16`), so a config with only a bf16 block built an
fp32 model under a bf16 engine: incident 1 (#1305, "expected scalar type BFloat16 but found Float" in the
rotary attention path). NeoX accepts `a-b` and `a_b` spellings of every key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ampdoctor.core.model import Location
from ampdoctor.dtypes import BF16, FP16, FP32, HALF
from ampdoctor.frameworks import deepspeed, hf
from ampdoctor.frameworks.base import Reading, as_bool, as_int, checkout_says, checkout_source, lower_str
from ampdoctor.frameworks.located import Document, merge_documents
from ampdoctor.frameworks.reader import Reader
from ampdoctor.policy import Policy
from ampdoctor.report import ReportError

NAME = "gpt-neox"

_MODEL_KEYS = frozenset({"num_layers", "hidden_size", "num_attention_heads"})
_NEOX_KEYS = _MODEL_KEYS | frozenset({
    "seq_length", "max_position_embeddings", "pos_emb", "rotary_pct", "rotary_emb_base", "pipe_parallel_size",
    "model_parallel_size", "precision", "fp32_allreduce", "tokenizer_type", "vocab_file", "merge_file", "data_path",
    "train_data_paths", "train_iters", "lr_decay_iters", "norm", "scaled_upper_triang_masked_softmax_fusion",
    "bias_gelu_fusion", "attention_config", "gpt_j_residual", "output_layer_parallelism", "no_weight_tying",
    "init_method", "output_layer_init_method", "checkpoint_activations", "partition_activations", "synchronize_each_layer",
    "launcher", "hostfile", "use_wandb", "wandb_project", "log_interval", "eval_interval", "save_interval", "split",
})
# The values NeoX accepts for `precision` (neox_arguments: "fp16", "fp32", "bfloat16").
PRECISIONS = {"fp16": FP16, "float16": FP16, "half": FP16, "bfloat16": BF16, "bf16": BF16, "fp32": FP32, "float32": FP32}


def canonical_key(key: Any) -> Any:
    return key.replace("-", "_") if isinstance(key, str) else key


def _keys(doc: Document) -> set[str]:
    return {canonical_key(k) for k in doc.keys() if isinstance(k, str)}


# Keys only NeoX (Megatron) configs use. Generic ones (tokenizer_type, wandb_project, data_path, split...) also
# appear in axolotl and HF configs and are no evidence.
_SPECIFIC = frozenset({
    "pos_emb", "rotary_pct", "rotary_emb_base", "pipe_parallel_size", "model_parallel_size", "fp32_allreduce",
    "scaled_upper_triang_masked_softmax_fusion", "bias_gelu_fusion", "attention_config", "gpt_j_residual",
    "output_layer_parallelism", "no_weight_tying", "init_method", "output_layer_init_method", "partition_activations",
    "synchronize_each_layer", "train_iters", "lr_decay_iters", "train_data_paths", "checkpoint_activations",
})


# Of those, the keys no Megatron-LM or Megatron-DeepSpeed argument (nor, in YAML, any other trainer's) has: `train_iters`,
# `lr_decay_iters`, `checkpoint_activations`, `partition_activations`, `synchronize_each_layer`, `model_parallel_size`,
# `bias_gelu_fusion` and `init_method` (torch.distributed's too) are Megatron's words as well, `fp32_allreduce` was, and
# `rotary_pct`/`rotary_emb_base` are keys of the HF GPT-NeoX model config too.
_NEOX_ONLY = frozenset({
    "pos_emb", "pipe_parallel_size", "scaled_upper_triang_masked_softmax_fusion",
    "attention_config", "gpt_j_residual", "output_layer_parallelism", "no_weight_tying", "output_layer_init_method",
    "train_data_paths", "valid_data_paths", "test_data_paths",
})


def identified(doc: Document) -> bool:
    """Whether the config is GPT-NeoX's beyond doubt: a key only NeoX uses, the DeeperSpeed `fp16: {type: bfloat16}`
    spelling, or a NeoX checkout around the file. A config recognised by keys Megatron-LM and other trainers share is
    NeoX's only perhaps: what NeoX refuses, it refuses only if NeoX reads the file."""
    if _keys(doc) & _NEOX_ONLY or lower_str(doc.get("fp16", "type")) in ("bfloat16", "bf16"):
        return True
    return checkout_source(doc.file, (_ARGUMENTS,)) is not None


def detect(doc: Document) -> bool:
    keys = _keys(doc)
    if hf.is_model_config(doc):
        return False  # its rotary keys (`rotary_pct`, `rotary_emb_base`) and `bf16: true` flag are the model's own
    if len(keys & _SPECIFIC) >= 2 or bool(keys & _MODEL_KEYS and keys & {"pos_emb", "pipe_parallel_size"}):
        return True
    if keys & _MODEL_KEYS and "precision" in keys:
        # a model size and a precision are every framework's words: NeoX's only with a precision NeoX spells
        # (Composer's `amp_bf16` beside `hidden_size` is Composer's)
        return lower_str(doc.get("precision")) in PRECISIONS
    # A partial NeoX config merged into the model config (`precision` in its own file): only keys NeoX knows.
    return "precision" in keys and keys <= _NEOX_KEYS | deepspeed.DS_KEYS


def is_model_file(doc: Document) -> bool:
    """A config that defines a model (others, like local_setup.yml, are merged into every model config)."""
    return bool(_keys(doc) & _MODEL_KEYS)


def merge(docs: list[Document]) -> Document:
    """NeoX's merge: top-level keys of all files, `-` and `_` spellings unified; each key keeps its own file."""
    return merge_documents(docs, docs[0].file, canonical_key)


def _model_dtype(doc: Document, declared: Any, engine: str | None) -> str | None:
    """The dtype NeoX builds the model in (`params_dtype`). Declared: from `precision`. Undeclared: since PR
    #1311 NeoX derives it from the bf16 block; before, from the fp16 block only, so a bf16 block alone gave
    fp32 (incident 1). Which of the two applies depends on the NeoX version, which a config does not say."""
    if declared is not None:
        return PRECISIONS.get(lower_str(declared))
    if engine == "fp16":
        return BF16 if lower_str(doc.get("fp16", "type")) in ("bfloat16", "bf16") else FP16
    if engine == "bf16":
        return BF16 if lower_str(doc.get("fp16", "type")) in ("bfloat16", "bf16") else None
    return FP32


# Since EleutherAI/gpt-neox PR #1311 (Nov 2024), `calculate_derived` sets `precision` from an enabled bf16 block.
_DERIVES_BF16 = re.compile(r"""self\.bf16\.get\(\s*["']enabled["'][\s\S]{0,200}?update_value\(\s*["']precision["']\s*,\s*["']bfloat16["']""")
# Before it, `precision` was derived from the fp16 block only, and nothing in the file sets it to bfloat16.
_DERIVES_FP16 = re.compile(r"""update_value\(\s*["']precision["']\s*,\s*["']fp16["']""")
_SETS_BF16 = re.compile(r"""precision["']?\s*(?:,|=(?!=))\s*["']bfloat16["']""")
_ARGUMENTS = Path("megatron", "neox_arguments", "arguments.py")


def checkout_derives_precision(config_file: str, levels: int = 6) -> tuple[bool | None, Location | None]:
    """Whether the NeoX checkout the config lives in derives `precision` from the bf16 block: True where its argument
    code does, False only where that code shows the old derivation (from the fp16 block, bfloat16 never set), and
    (None, None) when neither is seen — code that says it in other words, or no checkout: the version is unknown,
    never taken for old."""
    return checkout_says(config_file, (_ARGUMENTS,), "NeoX argument code", lambda text: bool(_DERIVES_BF16.search(text)),
                         lambda text: bool(_DERIVES_FP16.search(text)) and not _SETS_BF16.search(text), levels)


def read_group(docs: list[Document], errors: list[ReportError]) -> list[Reading]:
    """NeoX reads the YAML files passed to deepy.py as one config: partial files (local_setup.yml) are merged into
    every model file of the folder, each model file one run."""
    models = [d for d in docs if is_model_file(d)]
    partials = [d for d in docs if not is_model_file(d)]
    out = []
    for group in ([partials + [m] for m in models] if models else [partials]):
        merged = merge(group)
        merged.file = group[-1].file
        cfg = READER.read_safely(merged, errors)
        if cfg is not None:
            out.append(cfg)
    return out


def _block_from_precision(doc: Document, model_dtype: str) -> Document:
    """NeoX (PR #1311 onwards) turns the matching DeepSpeed block on from `precision`: the bf16 block unless one is
    written (`if not self.bf16`), the fp16 block even where it is written false (`fp16_args["enabled"] = True`, since
    PR #787; before it NeoX derived `precision` from the fp16 block, so the model ran fp32 like the engine)."""
    block = "bf16" if model_dtype == BF16 else "fp16"
    if block == "bf16" and doc.has(block) and as_bool(doc.get(block, "enabled")) is False:
        return doc
    return doc.with_overrides({(block, "enabled"): (True, doc.at("precision"))})


def read(doc: Document) -> Reading:
    files = tuple(sorted({loc.file for loc in doc.locations.values() if loc.file} | {doc.file}))
    cfg = Reading(NAME, doc.file, files=files)
    cfg.set("framework_known", identified(doc), doc.at("precision"))
    engine = deepspeed.precision_mode(doc)
    declared = doc.get("precision")
    model_dtype = _model_dtype(doc, declared, engine.name)
    if declared is not None:
        cfg.set("precision_setting", str(declared), doc.at("precision"))
    cfg.set("model_dtype", model_dtype, doc.at("precision") if declared is not None else engine.location)
    cfg.set("model_dtype_declared", declared is not None, doc.at("precision") if declared is not None else engine.location)
    if engine.name == "fp32" and model_dtype in HALF:
        doc = _block_from_precision(doc, model_dtype)
    derives, where = checkout_derives_precision(doc.file)
    if derives is not None and where is not None:
        cfg.set("model_dtype_from_engine", derives, where)
        if derives and declared is None and engine.name == "bf16":
            model_dtype = BF16  # this NeoX sets precision=bfloat16 itself
            cfg.set("model_dtype", model_dtype, engine.location)
    fp32_allreduce = as_bool(doc.get("fp32_allreduce", default=False))
    deepspeed.fill_policy(doc, cfg, reduce_fp32=(bool(fp32_allreduce), doc.at("fp32_allreduce")))
    if lower_str(doc.get("pos_emb", default="learned")) == "rotary":
        # NeoX's RotaryEmbedding casts its cos/sin cache to the model precision.
        cfg.set("rotary_table_dtype", model_dtype, doc.at("pos_emb"))
        positions = as_int(doc.get("max_position_embeddings")) or as_int(doc.get("seq_length"))
        if positions:
            cfg.set("max_positions", positions, doc.at("max_position_embeddings") if doc.has("max_position_embeddings") else doc.at("seq_length"))
    return cfg


def export(policy: Policy) -> tuple[dict[str, Any], list[str]]:
    config, notes = deepspeed.export(policy)
    precision = {BF16: "bfloat16", FP16: "fp16"}.get(policy.compute, "fp32")
    out: dict[str, Any] = {"precision": precision}
    comm = config.pop("communication_data_type", None)
    out.update(config)
    if comm == "fp32":
        out["fp32_allreduce"] = True
    elif comm is not None:
        out["communication_data_type"] = comm
    if policy.compute in HALF:
        notes.append(f"rotary tables: with pos_emb: rotary NeoX casts its cos/sin cache to the model precision "
                     f"({'bfloat16' if policy.compute == BF16 else 'fp16'}); ampdoctor.fix.rope keeps them fp32")
    return out, notes


READER = Reader(NAME, detect, read, read_group=read_group, export=export, label="NeoX", key="neox")
