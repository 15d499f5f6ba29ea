"""torchtitan job configs (TOML: `[training]`, `[parallelism]`) -> Policy, and Policy -> the job config's keys.

What torchtitan does with them (its `Training` job-config fields and `distributed/fsdp.py`):
- `training.dtype` (default float32) is the dtype the model is built in: weights, gradients and the optimizer state
  that follows them. `bfloat16` is pure-bf16 training, with no fp32 master copy.
- `training.mixed_precision_param` (default bfloat16) is the compute dtype. With FSDP (`data_parallel_shard_degree`
  or `context_parallel_degree` above 1; -1 takes the ranks left over) it is `fully_shard`'s `param_dtype`;
  under DDP or on one device torchtitan applies it with `torch.autocast`.
- `training.mixed_precision_reduce` (default float32) is FSDP's `reduce_dtype`; torchtitan accepts only float32
  (its config refuses anything else at start-up). Without FSDP gradients are all-reduced in their own dtype.
- Micro-batches: `global_batch_size` / (`local_batch_size` x data-parallel degree) gradient accumulation steps,
  where all of those are known.
Not modelled: float8 converters (`[quantize]`), which change matmul inputs, not the policy's fields.
"""

from __future__ import annotations

from typing import Any

from ampdoctor.dtypes import BF16, FP16, FP32
from ampdoctor.frameworks.base import PolicyBuilder, Reading, as_dtype, as_int
from ampdoctor.frameworks.located import Document
from ampdoctor.frameworks.reader import Reader
from ampdoctor.policy import Policy

NAME = "torchtitan"
# Keys only a torchtitan job config has (its `[training]` and `[parallelism]` tables).
_SPECIFIC = frozenset({"mixed_precision_param", "mixed_precision_reduce", "data_parallel_shard_degree",
                       "data_parallel_replicate_degree", "local_batch_size", "pipeline_parallel_degree"})
_NAMES = {FP32: "float32", BF16: "bfloat16", FP16: "float16"}
_DEGREES = ("data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree",
            "pipeline_parallel_degree", "context_parallel_degree")


def detect(doc: Document) -> bool:
    if not isinstance(doc.data, dict) or not isinstance(doc.data.get("training"), dict):
        return False
    parallelism = doc.data.get("parallelism")
    keys = set(doc.data["training"]) | (set(parallelism) if isinstance(parallelism, dict) else set())
    return bool(keys & _SPECIFIC)


def _dtype(doc: Document, cfg: Reading, key: str, default: str, allowed: tuple[str, ...]) -> str:
    """A `[training]` dtype, reported as invalid at its key where torchtitan would refuse it."""
    raw = doc.get("training", key, default=default)
    dtype = as_dtype(raw)
    if dtype not in allowed:
        names = ", ".join(_NAMES[d] for d in allowed)
        cfg.invalid.append((doc.at("training", key), f"training.{key} = {raw!r}: torchtitan accepts {names}"))
        return as_dtype(default) or FP32
    return dtype


def _degrees(doc: Document) -> dict[str, int | None]:
    defaults = {"data_parallel_shard_degree": -1}
    return {key: as_int(doc.get("parallelism", key, default=defaults.get(key, 1))) for key in _DEGREES}


def _parallel_facts(doc: Document, cfg: Reading, degrees: dict[str, int | None]) -> bool:
    """Strategy, world size and accumulation steps from the degrees; whether FSDP shards the model."""
    shard, replicate = degrees["data_parallel_shard_degree"], degrees["data_parallel_replicate_degree"]
    cp = degrees["context_parallel_degree"]
    # -1 shards over the ranks the other degrees leave: FSDP on any run of more than one rank.
    fsdp = (shard is not None and (shard > 1 or shard == -1)) or (cp is not None and cp > 1)
    at = doc.at("parallelism", "data_parallel_shard_degree")
    cfg.set("strategy", "fsdp" if fsdp else ("ddp" if replicate and replicate > 1 else "single"), at, not doc.has("parallelism"))
    if all(d is not None and d > 0 for d in degrees.values()):
        world = 1
        for d in degrees.values():
            world *= d  # type: ignore[operator]
        cfg.set("world_size", world, doc.at("parallelism"))
        local, total = as_int(doc.get("training", "local_batch_size")), as_int(doc.get("training", "global_batch_size"))
        per_step = (local or 0) * (shard or 1) * (replicate or 1)
        if total and total > 0 and per_step and total % per_step == 0:
            cfg.set("grad_accum_steps", total // per_step, doc.at("training", "global_batch_size"))
    return fsdp


def read(doc: Document) -> Reading:
    cfg = Reading(NAME, doc.file)
    params = _dtype(doc, cfg, "dtype", "float32", (FP32, BF16))
    compute = _dtype(doc, cfg, "mixed_precision_param", "bfloat16", (BF16, FP32))
    reduce = _dtype(doc, cfg, "mixed_precision_reduce", "float32", (FP32,))
    cfg.set("precision_setting", _NAMES[compute], doc.at("training", "mixed_precision_param"), not doc.has("training", "mixed_precision_param"))
    fsdp = _parallel_facts(doc, cfg, _degrees(doc))
    params_at, compute_at = doc.at("training", "dtype"), doc.at("training", "mixed_precision_param")
    if params != FP32:
        compute, compute_at = params, params_at  # pure low-precision training: nothing is cast up or down
    cfg.set("autocast", compute != params and not fsdp, compute_at)
    cfg.set("master_weights", "none" if params != FP32 else "params", params_at, not doc.has("training", "dtype"))
    b = PolicyBuilder(params_at)
    b.set("params", params, params_at)
    b.set("compute", compute, compute_at)
    for name in ("grads", "grad_accum", "optimizer_state"):
        b.set(name, params, params_at)
    # FSDP reduce-scatters in its reduce_dtype; DDP all-reduces the gradients as they are.
    b.set("reduce", reduce if fsdp else params, doc.at("training", "mixed_precision_reduce") if fsdp else params_at)
    b.set("loss_scale", "none", compute_at)
    cfg.policy, cfg.sources = b.build()
    return cfg


def export(policy: Policy) -> tuple[dict[str, Any], list[str]]:
    notes: list[str] = []
    params = policy.params if policy.params in (FP32, BF16) else FP32
    compute = policy.compute if policy.compute in (FP32, BF16) else BF16
    if policy.params not in (FP32, BF16) or policy.compute not in (FP32, BF16):
        notes.append(f"params={policy.params}, compute={policy.compute}: torchtitan trains in float32 or bfloat16 only")
    if policy.reduce != FP32:
        notes.append(f"reduce={policy.reduce}: torchtitan reduces in float32 only (mixed_precision_reduce)")
    if policy.loss_scale != "none":
        notes.append(f"loss_scale={policy.loss_scale}: torchtitan has no loss scaling (bf16 needs none)")
    config = {"training": {"dtype": _NAMES[params], "mixed_precision_param": _NAMES[compute], "mixed_precision_reduce": "float32"},
              "parallelism": {"data_parallel_shard_degree": -1}}
    return config, notes


READER = Reader(NAME, detect, read, export=export, syntax="toml", label="torchtitan")
