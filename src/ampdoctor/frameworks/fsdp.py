"""PyTorch FSDP: Policy <-> FSDP2 `MixedPrecisionPolicy` (FSDP1 `MixedPrecision` where FSDP2 is missing).

FSDP keeps the sharded parameters in the dtype the model was built in (the policy's `params`), all-gathers
and computes in `param_dtype`, reduce-scatters gradients in `reduce_dtype` and hands the optimizer sharded
gradients in the parameter dtype. Loss scaling needs `ShardedGradScaler` in code; it is not part of the policy.
"""

from __future__ import annotations

from typing import Any

from ampdoctor import dtypes
from ampdoctor.core.model import Location
from ampdoctor.dtypes import FP32
from ampdoctor.frameworks.base import Reading, as_dtype
from ampdoctor.frameworks.document import Document
from ampdoctor.frameworks.reader import Reader
from ampdoctor.policy import Policy

NAME = "fsdp"


def mixed_precision_class() -> type:
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy  # FSDP2, torch >= 2.6

        return MixedPrecisionPolicy
    except ImportError:  # pragma: no cover - older torch
        from torch.distributed.fsdp import MixedPrecision

        return MixedPrecision


def to_fsdp(policy: Policy) -> Any:
    """The FSDP mixed-precision object for `policy` (needs torch)."""
    cls = mixed_precision_class()
    if cls.__name__ == "MixedPrecisionPolicy":
        return cls(param_dtype=policy.compute_dtype, reduce_dtype=policy.reduce_dtype, output_dtype=policy.output_dtype, cast_forward_inputs=True)
    return cls(param_dtype=policy.compute_dtype, reduce_dtype=policy.reduce_dtype, buffer_dtype=policy.compute_dtype)  # pragma: no cover


def from_fsdp(mp: Any, params: Any = FP32) -> Policy:
    """The policy an FSDP `MixedPrecisionPolicy`/`MixedPrecision` runs over a model built in `params`."""
    params = dtypes.canonical(params) or FP32
    compute = dtypes.canonical(getattr(mp, "param_dtype", None)) or params
    reduce = dtypes.canonical(getattr(mp, "reduce_dtype", None)) or compute
    output = dtypes.canonical(getattr(mp, "output_dtype", None)) or compute
    return Policy.derive(params=params, compute=compute, output=output, reduce=reduce,
                         grads=params, grad_accum=params, optimizer_state=params)


def read(doc: Document) -> Reading:
    """An FSDP mixed-precision object given as its keyword arguments (written in Python: `MixedPrecision(param_dtype=...)`).
    The sharded weights keep the dtype the model was built in, which the object does not say: fp32, as FSDP's
    mixed precision is meant to be used; a loss scaler is code (`ShardedGradScaler`), not part of the object, so the
    loss scaling is left as the policy derives it."""
    cfg = Reading(NAME, doc.file)
    given = {key: as_dtype(doc.get(key)) for key in ("param_dtype", "reduce_dtype", "output_dtype") if doc.get(key) is not None}
    first = next(iter(doc.locations.values()), Location(file=doc.file))
    compute = given.get("param_dtype") or FP32
    at = doc.at("param_dtype") if "param_dtype" in given else first
    fields = {"params": FP32, "compute": compute, "output": given.get("output_dtype") or compute,
              "reduce": given.get("reduce_dtype") or compute, "grads": FP32, "grad_accum": FP32, "optimizer_state": FP32}
    cfg.policy = Policy.derive(**fields)
    cfg.sources = {name: doc.at(f"{name}_dtype") if f"{name}_dtype" in given else at for name in fields}
    cfg.sources["reduce"] = doc.at("reduce_dtype") if "reduce_dtype" in given else at
    cfg.sources["compute"] = at
    cfg.set("strategy", "fsdp", first)
    cfg.set("autocast", False, at)
    return cfg


def export(policy: Policy) -> tuple[str, list[str]]:
    """Python source that builds the FSDP2 policy, and what FSDP cannot express."""
    notes: list[str] = []
    t = dtypes.TORCH_NAMES
    for name in ("grads", "grad_accum", "optimizer_state"):
        if getattr(policy, name) != policy.params:
            notes.append(f"{name}={getattr(policy, name)}: FSDP keeps sharded gradients and the optimizer's "
                         f"parameters in the parameter dtype ({policy.params})")
    if policy.loss_scale != "none":
        notes.append(f"loss_scale={policy.loss_scale}: use torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler in the training loop")
    lines = [
        "import torch",
        "from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard",
        "",
        f"# Build the model in {t[policy.params]} (the sharded master parameters), then:",
        "mp_policy = MixedPrecisionPolicy(",
        f"    param_dtype={t[policy.compute]},",
        f"    reduce_dtype={t[policy.reduce]},",
        f"    output_dtype={t[policy.output]},",
        "    cast_forward_inputs=True,",
        ")",
        "# for each transformer block: fully_shard(block, mp_policy=mp_policy); then fully_shard(model, mp_policy=mp_policy)",
    ]
    return "\n".join(lines) + "\n", notes


READER = Reader(NAME, read=read, export=export, syntax="python", label="FSDP", build=to_fsdp, policy_of=from_fsdp)
