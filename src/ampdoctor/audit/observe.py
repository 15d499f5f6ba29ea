"""What a recorded run actually did, as a `Policy` and `RunFacts`: the input of the policy-level rules at
run time, so that the audit judges a run by the same predicates as config lint and `Policy.validate()`.

Every field is observed, not assumed: the parameter dtype is the trainable parameters' own, compute is the
autocast dtype when autocast was on in the forward (else the parameters'), gradients are the `.grad` dtypes
at the optimizer step, loss scaling is a GradScaler's unscale kernels having run. Facts the recording cannot
tell stay unknown.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ampdoctor import dtypes
from ampdoctor.audit.evidence import When
from ampdoctor.audit.fields import AUTOCAST, FORWARD, PHASE
from ampdoctor.audit.provenance import FLOATS, Trace, relpath
from ampdoctor.audit.provenance import HALF as HALF_DTYPES
from ampdoctor.audit.rankfacts import MAX_COLLECTIVES, CollectiveCall, RankFacts
from ampdoctor.core.model import Location
from ampdoctor.facts import MASTER_OPTIMIZERS, Device, RunFacts
from ampdoctor.policy import Policy

_UNSCALE_OPS = ("aten::_amp_foreach_non_finite_check_and_unscale_", "aten::_amp_update_scale_")
# Gradient reductions, also the flat-buffer forms FSDP2 calls (`c10d::_reduce_scatter_base_`).
_COLLECTIVE = re.compile(r"c10d::_?(allreduce|all_reduce|reduce_scatter|reduce)")
# All-gathers in the forward: FSDP2 gathers the sharded parameters in its `MixedPrecisionPolicy.param_dtype`,
# which is then the dtype the forward computes in (no autocast involved).
_FORWARD_GATHER = re.compile(r"c10d::_?(allgather|all_gather)")
# Trainable parameters of adapters (PEFT LoRA/IA3/prompt tuning, adapter-transformers).
_ADAPTER = re.compile(r"(^|\.)(lora_|ia3_|adapter|prompt_encoder|modules_to_save)")


@dataclass(frozen=True)
class Observed:
    policy: Policy | None  # None when no parameter was seen
    facts: RunFacts
    locations: Mapping[str, Location]
    # For the cross-rank checks: every trainable parameter's dtype, and the collectives called, in order.
    param_dtypes: Mapping[str, str] = field(default_factory=dict)
    collectives: tuple[CollectiveCall, ...] = ()

    def rank_facts(self) -> RankFacts:
        return RankFacts(str(self.policy) if self.policy is not None else None, self.param_dtypes, self.collectives)


def _majority(values: Iterable[Any]) -> Any:
    counted = Counter(v for v in values if v is not None)
    return counted.most_common(1)[0][0] if counted else None


def _kinds(trace: Trace, named: Callable[[str], Any]) -> frozenset[str]:
    """The names of the recorded op kinds that `named` accepts: asked before walking every record for one of them."""
    return frozenset(name for name in trace.recorded() if named(name))


def _first_of(trace: Trace, named: Callable[[str], Any], also: Callable[[Any], bool] = lambda r: True) -> int | None:
    """The first record of an op kind `named` accepts (and `also` of its record); no walk where none was recorded."""
    kinds = _kinds(trace, named)
    return _first(trace, lambda r: trace.op(r[0]) in kinds and also(r)) if kinds else None


def _first(trace: Trace, match: Any) -> int | None:
    return next((r[0] for r in trace.records if match(r)), None)


def _trainable(trace: Trace) -> list[tuple[str, Any]]:
    out = []
    for pid, ref in trace.rec.params.items():
        p = ref()
        if p is not None and p.requires_grad and p.dtype in FLOATS:
            out.append((trace.param_name(pid), p))
    return out


def _optimizer_facts(trace: Trace) -> tuple[dict[str, Any], Location | None]:
    events = trace.optimizer_steps
    if not events:
        return {"trains": False}, None
    ev = events[0]
    code, line = ev.frame
    where = Location(file=relpath(code.co_filename) if code else None, line=line or None, phase="optimizer", op=f"{ev.optimizer}.step")
    master = bool(MASTER_OPTIMIZERS.search(ev.optimizer))
    plain = ev.module.startswith("torch.optim")
    facts = {
        "trains": True,
        "optimizer": ev.optimizer,
        "optimizer_kind": "master" if master else ("plain" if plain else None),
        "master_weights": "optimizer" if master else None,
        "grad_accum_steps": max(1, ev.backward_passes),
    }
    return facts, where


def _devices(params: list[tuple[str, Any]]) -> tuple[Device, ...] | None:
    kinds = sorted({str(p.device) for _, p in params if p.device.type == "cuda"})
    if not kinds:
        return None
    from ampdoctor.hardware import device_fact

    return tuple(device_fact(k) for k in kinds)


def _world_size() -> int:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_world_size()
    except (ImportError, RuntimeError):
        pass
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def observe(trace: Trace) -> Observed:
    """The policy the recorded run ran with, the facts the recording shows, and where each was seen."""
    params = _trainable(trace)
    opt, opt_at = _optimizer_facts(trace)
    locations: dict[str, Location] = {}
    if opt_at is not None:
        for name in ("grads", "grad_accum", "optimizer_state", "optimizer", "optimizer_kind", "grad_accum_steps", "trains"):
            locations[name] = opt_at
    names = [n for n, _ in params]
    frozen = any(not p.requires_grad for p in trace.parameters())
    adapters = bool(names) and frozen and all(_ADAPTER.search(n) for n in names)
    autocast_seq = _first(trace, lambda r: r[PHASE] == FORWARD and r[AUTOCAST])
    facts = RunFacts(world_size=_world_size(), devices=_devices(params), adapters_only=adapters, autocast=autocast_seq is not None, **opt)
    param_dtypes = {n: dtypes.name_of(p.dtype) for n, p in params}
    collectives = _collectives(trace)
    if not params:
        return Observed(None, facts, locations, param_dtypes, collectives)
    return Observed(_observed_policy(trace, params, autocast_seq, locations), facts, locations, param_dtypes, collectives)


def _collectives(trace: Trace) -> tuple[CollectiveCall, ...]:
    out: list[CollectiveCall] = []
    kinds = _kinds(trace, lambda name: name.startswith("c10d::"))
    if not kinds:
        return ()
    for r in trace.records:
        name = trace.op(r[0])
        if name in kinds:
            out.append(CollectiveCall(name, tuple(dtypes.name_of(d) for d, _ in trace.float_inputs(r[0])), trace.location(r[0])))
            if len(out) >= MAX_COLLECTIVES:
                break
    return tuple(out)


def _observed_policy(trace: Trace, params: list[tuple[str, Any]], autocast_seq: int | None, locations: dict[str, Location]) -> Policy:
    locations["params"] = Location(module="", label=f"{len(params)} trainable parameters")
    given: dict[str, Any] = {"params": dtypes.name_of(_majority(p.dtype for _, p in params))}
    if autocast_seq is not None and trace.rec.autocast_dtypes:
        given["compute"] = dtypes.name_of(_majority(trace.rec.autocast_dtypes))
        locations["compute"] = locations["autocast"] = trace.location(autocast_seq, "first op under autocast")
    else:
        gather = _first_of(trace, _FORWARD_GATHER.match, lambda r: r[PHASE] == FORWARD)
        gathered = trace.float_inputs(gather) if gather is not None else []
        if gathered and gathered[0][0] in HALF_DTYPES:
            given["compute"] = dtypes.name_of(gathered[0][0])
            locations["compute"] = trace.location(gather, "parameters all-gathered in this dtype for the forward")
    events = trace.grad_snapshots
    grads = _majority(s.grad_dtype for s in events if s.when == When.OPTIMIZER_STEP) or _majority(s.grad_dtype for s in events)
    if grads is not None:
        given["grads"] = given["grad_accum"] = dtypes.name_of(grads)
    states = [d for ev in trace.optimizer_steps[:1] for (_, d) in ev.state_dtypes]
    if states:
        given["optimizer_state"] = dtypes.name_of(_majority(states))
    unscale = _first_of(trace, _UNSCALE_OPS.__contains__)
    given["loss_scale"] = "dynamic" if unscale is not None else "none"
    if unscale is not None:
        locations["loss_scale"] = trace.location(unscale, "GradScaler unscales here")
    given.update(_reduce(trace, given, locations))
    return Policy.derive(**given)


def _reduce(trace: Trace, given: dict[str, Any], locations: dict[str, Location]) -> dict[str, str]:
    """The dtype a gradient collective ran in; without one seen, what DDP and FSDP reduce: the gradients."""
    collective = _first_of(trace, _COLLECTIVE.match)
    if collective is not None:
        reduced = trace.float_inputs(collective)
        if reduced:
            locations["reduce"] = trace.location(collective)
            return {"reduce": dtypes.name_of(reduced[0][0])}
    return {"reduce": given["grads"]} if "grads" in given else {}
