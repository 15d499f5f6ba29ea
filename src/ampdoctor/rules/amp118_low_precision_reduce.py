"""AMP118 low-precision-reduce: Gradient all-reduce / reduce-scatter runs in bf16 or fp16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP118`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, policy_check
from ampdoctor.dtypes import HALF, describe_half
from ampdoctor.facts import RunFacts
from ampdoctor.lint.python.context import CodeHit, Context, calls_named
from ampdoctor.lint.python.dataflow import describe
from ampdoctor.lint.python.resolve import argument, has_star_kwargs, last_identifier
from ampdoctor.policy import Policy


@code_check("AMP118", triggers=("MixedPrecision",))
def low_precision_reduce(ctx: Context) -> Iterator[CodeHit]:
    # pytorch #106395: FSDP gradient reduction in bf16 diverges at large data parallelism.
    names = {"torch.distributed.fsdp.MixedPrecision", "torch.distributed.fsdp.MixedPrecisionPolicy"}
    replaced = None
    for call, name in calls_named(ctx, names):
        if has_star_kwargs(call) or _only_compared(ctx, call):
            continue
        if replaced is None:
            replaced = _fsdp_replaced(ctx)
        if replaced:
            continue
        scope = ctx.src.scope(call)
        reduce = argument(call, 1, "reduce_dtype")
        # `reduce_dtype=None` is the default spelled out: both FSDP APIs then reduce in the param dtype.
        if reduce is not None and not (isinstance(reduce, ast.Constant) and reduce.value is None):
            said = _half(ctx, reduce, scope)
            if said:
                yield reduce, f"gradients are reduced in {said}; use `reduce_dtype=torch.float32`"
            continue
        said = _half(ctx, argument(call, 0, "param_dtype"), scope, describe)
        if said:
            yield call, (f"`{name.rsplit('.', 1)[-1]}` without `reduce_dtype` reduces gradients in the param dtype "
                         f"({said}); pass `reduce_dtype=torch.float32`")


def _half(ctx: Context, expr: ast.AST | None, scope: ast.AST, say=describe_half) -> str | None:
    """The half dtype `expr` names, said with the runs it holds in; None where it names none. A dtype the run
    chooses (``{...}[args.grad_precision or args.precision]``) is judged in the runs the project makes of the file
    (`Facts.dtypes_per_run`: its launch lines, or the run with the script's defaults), where they are known: none
    of them half, and a half reduce is only what a user may ask for."""
    dtypes = ctx.flow.dtype_of(expr, scope)
    if not dtypes or not dtypes & HALF:
        return None
    runs = ctx.facts.dtypes_per_run(expr, scope) if dtypes - HALF else None
    if runs is None or any(d & HALF and d - HALF for _, d in runs):  # a run that may reduce either way: not known
        return say(dtypes)
    half = [(where, d & HALF) for where, d in runs if d & HALF]
    if not half:
        return None
    named = describe(frozenset().union(*(d for _, d in half)))
    places = [where for where, _ in half if where is not None]
    if not places:
        return f"{named} in a run with the script's default options"
    more = f" and {len(places) - 1} more" if len(places) > 1 else ""
    return f"{named} in the run `{places[0]}` starts{more}"


def _only_compared(ctx: Context, call: ast.Call) -> bool:
    """A policy that is an expected value (`assert plugin.policy == MixedPrecision(...)`, or bound to a name used
    only in comparisons): it describes what other code builds, and reduces nothing itself."""
    parent = ctx.src.parents.get(call)
    if isinstance(parent, ast.Compare):
        return True
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        return False
    name, scope = parent.targets[0].id, ctx.src.scope(call)
    uses = [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
    return bool(uses) and all(isinstance(ctx.src.parents.get(n), ast.Compare) for n in uses)


_FSDP_WRAPPERS = ("fully_shard", "FullyShardedDataParallel")


def _fsdp_replaced(ctx: Context) -> bool:
    """The file swaps FSDP's wrapper for a fake (`monkeypatch.setattr(fsdp, "fully_shard", fake)`,
    `mock.patch("torch.distributed.fsdp.fully_shard")`): its policies are test inputs handed to that fake."""
    for const in ctx.src.strings:
        if const.value.rsplit(".", 1)[-1] not in _FSDP_WRAPPERS:
            continue
        parent = ctx.src.parents.get(const)
        if isinstance(parent, ast.Call) and last_identifier(parent.func) in ("setattr", "patch", "object"):
            return True
    return False


# Data-parallel world size from which a half-precision gradient reduce is a warning rather than a note
# (the rounding error grows with the number of ranks: pytorch #106395 at 48x8 GPUs, Megatron-LM #6199).
LARGE_WORLD = 16


@policy_check("AMP118")
def low_precision_reduce_policy(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    world = facts.world_size
    if policy is None or policy.reduce not in HALF or world == 1 or facts.trains is False:
        return
    large = world is not None and world >= LARGE_WORLD
    size = f"{world} ranks" if world else "a world size the input does not fix"
    here = at("reduce")
    yield Hit(f"gradients are all-reduced in {policy.reduce} over {size}: every hop rounds, and the error grows with the ranks",
              here, severity=None if large else Severity.INFO, related=at.others(here, "world_size") if world else ())
