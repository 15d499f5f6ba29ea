"""GPT-NeoX YAML configs (several files merged as `deepy.py train.py a.yml b.yml` merges them) -> Policy.

NeoX builds its model in `params_dtype`, derived from `precision`, while the DeepSpeed engine inside runs
whatever the `fp16`/`bf16` blocks say. Before EleutherAI/gpt-neox PR #1311, an unset `precision` was derived
from the fp16 block only (bf16 only for `fp16.type: bfloat16`), so a config with only a bf16 block built an
fp32 model under a bf16 engine: incident 1 (#1305, "expected scalar type BFloat16 but found Float" in the
rotary attention path). NeoX accepts `a-b` and `a_b` spellings of every key.
"""

from __future__ import annotations

from typing import Any

import torch

from ampdoctor.frameworks import deepspeed
from ampdoctor.frameworks.base import EffectiveConfig, as_bool, as_int, lower_str
from ampdoctor.frameworks.located import Document, merge_documents
from ampdoctor.policy import Policy
from ampdoctor.rules import finding

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
_DTYPE_OF_PRECISION = {"fp16": torch.float16, "float16": torch.float16, "half": torch.float16,
                       "bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "fp32": torch.float32, "float32": torch.float32}


def canonical_key(key: Any) -> Any:
    return key.replace("-", "_") if isinstance(key, str) else key


def _keys(doc: Document) -> set[str]:
    return {canonical_key(k) for k in doc.keys() if isinstance(k, str)}


def detect(doc: Document) -> bool:
    keys = _keys(doc)
    specific = keys & (_NEOX_KEYS - {"precision", "norm", "split", "launcher", "hostfile", "log_interval", "eval_interval", "save_interval"})
    return len(specific) >= 2 or bool(keys & _MODEL_KEYS and keys & {"pos_emb", "pipe_parallel_size", "precision"})


def is_model_file(doc: Document) -> bool:
    """A config that defines a model (others, like local_setup.yml, are merged into every model config)."""
    return bool(_keys(doc) & _MODEL_KEYS)


def merge(docs: list[Document]) -> Document:
    """NeoX's merge: top-level keys of all files, `-` and `_` spellings unified; each key keeps its own file."""
    return merge_documents(docs, docs[0].file, canonical_key)


def read(doc: Document) -> EffectiveConfig:
    files = tuple(sorted({loc.file for loc in doc.locations.values() if loc.file} | {doc.file}))
    cfg = EffectiveConfig(NAME, doc.file, None, files=files)
    engine = deepspeed.precision_mode(doc)  # fill_policy reports its findings once
    declared = doc.get("precision")
    declared_dtype = _DTYPE_OF_PRECISION.get(lower_str(declared)) if declared is not None else None
    engine_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "amp": torch.float16, "fp32": torch.float32}.get(engine.name or "")
    rotary = lower_str(doc.get("pos_emb", default="learned")) == "rotary"
    rope_note = (" NeoX's rotary embedding and attention then run in fp32 while DeepSpeed feeds bf16 activations "
                 "(incident 1: 'expected scalar type BFloat16 but found Float')." if rotary else "")
    if declared is None:
        # Pre-#1311 derivation: precision comes from the fp16 block only.
        model_dtype = torch.float16 if engine.name == "fp16" else torch.float32
        cfg.set("model_precision", model_dtype, doc.at("fp16") if engine.name == "fp16" else engine.location, True)
        if engine.name == "bf16" and _fp16_typed_bf16(doc):
            model_dtype = torch.bfloat16
        elif engine.name == "bf16":
            cfg.findings.append(finding(
                "precision-config-mismatch",
                "the DeepSpeed bf16 block is enabled but `precision` is unset: NeoX (before PR #1311) derives "
                "params_dtype=fp32 from the missing fp16 block, so the model is built in fp32 under a bf16 engine." + rope_note,
                engine.location, related=[doc.at("pos_emb")] if rotary else []))
    else:
        model_dtype = declared_dtype
        cfg.set("model_precision", model_dtype, doc.at("precision"))
        if declared_dtype is None:
            cfg.findings.append(finding(
                "precision-config-mismatch",
                f"precision={declared!r} is not one NeoX knows (fp16, bfloat16, fp32): the model and DeepSpeed engine dtypes are undefined",
                doc.at("precision")))
        elif engine_dtype is not None and engine.name != "fp32" and engine_dtype != declared_dtype:
            cfg.findings.append(finding(
                "precision-config-mismatch",
                f"precision={declared!r} but the DeepSpeed {engine.name} block is enabled: NeoX builds the model in "
                f"{_name(declared_dtype)} while the engine casts it to {_name(engine_dtype)}",
                doc.at("precision"), related=[engine.location]))
        elif engine.name == "fp32" and declared_dtype in (torch.bfloat16, torch.float16):
            # NeoX (PR #1311 onwards) turns the matching DeepSpeed block on from `precision`.
            block = "bf16" if declared_dtype == torch.bfloat16 else "fp16"
            if doc.has(block) and as_bool(doc.get(block, "enabled")) is False:
                cfg.findings.append(finding(
                    "precision-config-mismatch",
                    f"precision={declared!r} but `{block}.enabled` is false: NeoX builds a {_name(declared_dtype)} model for an fp32 engine",
                    doc.at("precision"), related=[doc.at(block, "enabled")]))
            else:
                doc = doc.with_overrides({(block, "enabled"): (True, doc.at("precision"))})
    fp32_allreduce = as_bool(doc.get("fp32_allreduce", default=False))
    deepspeed.fill_policy(doc, cfg, reduce_fp32=(bool(fp32_allreduce), doc.at("fp32_allreduce")))
    pipe = as_int(doc.get("pipe_parallel_size", default=0)) or 0
    cfg.set("pipeline", pipe >= 1, doc.at("pipe_parallel_size"), not doc.has("pipe_parallel_size"))
    if rotary and model_dtype in (torch.bfloat16, torch.float16):
        positions = as_int(doc.get("max_position_embeddings")) or as_int(doc.get("seq_length"))
        cfg.findings.append(finding(
            "rope-cache-low-precision",
            f"pos_emb=rotary with precision {_name(model_dtype)}: NeoX's RotaryEmbedding casts its cos/sin cache to the "
            f"model precision" + (f", inexact beyond ~256 of the {positions} positions" if positions and positions > 256 else ""),
            doc.at("pos_emb"), related=[doc.at("precision")] if doc.has("precision") else []))
    return cfg


def _fp16_typed_bf16(doc: Document) -> bool:
    return lower_str(doc.get("fp16", "type")) in ("bfloat16", "bf16")


def _name(dtype: torch.dtype | None) -> str:
    from ampdoctor.policy import dtype_name

    return dtype_name(dtype) if dtype is not None else "?"


def export(policy: Policy) -> tuple[dict[str, Any], list[str]]:
    config, notes = deepspeed.export(policy)
    precision = {torch.bfloat16: "bfloat16", torch.float16: "fp16"}.get(policy.compute, "fp32")
    out: dict[str, Any] = {"precision": precision}
    comm = config.pop("communication_data_type", None)
    out.update(config)
    if comm == "fp32":
        out["fp32_allreduce"] = True
    elif comm is not None:
        out["communication_data_type"] = comm
    if policy.compute in (torch.bfloat16, torch.float16):
        notes.append(f"rotary tables: with pos_emb: rotary NeoX casts its cos/sin cache to the model precision "
                     f"({'bfloat16' if policy.compute == torch.bfloat16 else 'fp16'}); ampdoctor.fix.rope keeps them fp32")
    return out, notes

