"""AMP118 low-precision-reduce: Gradient all-reduce / reduce-scatter runs in bf16 or fp16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP118`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, policy_check
from ampdoctor.dtypes import FP32, HALF, describe_half
from ampdoctor.facts import RunFacts
from ampdoctor.frameworks import deepspeed
from ampdoctor.lint.python.config_values import ConfigValue, ConfigValues, key_path, stored_keys
from ampdoctor.lint.python.context import CodeHit, Context, calls_named
from ampdoctor.lint.python.dataflow import TORCH_DTYPES, describe
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
                chosen = _pure_half_beside_fp32(ctx, call, reduce, scope) if said[1] is None else None
                yield (reduce, f"gradients are reduced in {said[0]}{chosen}", Severity.INFO) if chosen \
                    else (reduce, f"gradients are reduced in {said[0]}{_advice(said, 'use')}", said[1])
            continue
        said = _half(ctx, argument(call, 0, "param_dtype"), scope, describe)
        if said:
            yield call, (f"`{name.rsplit('.', 1)[-1]}` without `reduce_dtype` reduces gradients in the param dtype "
                         f"({said[0]}){_advice(said, 'pass')}"), said[1]


def _pure_half_beside_fp32(ctx: Context, call: ast.Call, reduce: ast.AST, scope: ast.AST) -> str:
    """The policy is all one half dtype (params, reduce and buffers: a pure-half mode), and the other side of a
    branch builds a policy that reduces in float32 (``if args.fsdp_amp: MixedPrecision(param_dtype=torch.bfloat16,
    reduce_dtype=torch.float32, ...) elif args.fsdp_pure_bf16: MixedPrecision(<all bf16>)``): the code offers the fp32
    reduce and this one as alternatives, and a run reduces in half only where it picks the pure-half mode over the
    other. Said as the end of a note's message; "" otherwise."""
    half = ctx.flow.dtype_of(reduce, scope)
    if not half or not half <= HALF or len(half) != 1:
        return ""
    if any(ctx.flow.dtype_of(argument(call, i, name), scope) != half for i, name in ((0, "param_dtype"), (2, "buffer_dtype"))):
        return ""
    names = {"torch.distributed.fsdp.MixedPrecision", "torch.distributed.fsdp.MixedPrecisionPolicy"}
    for other, _ in calls_named(ctx, names):
        wide = argument(other, 1, "reduce_dtype")
        if other is not call and wide is not None and ctx.flow.dtype_of(wide, ctx.src.scope(other)) == {FP32} \
                and ctx.src.exclusive(other, call):
            return (f" in a pure-{describe(half)} policy (params, reduce and buffers), built on the other side of a branch "
                    f"from the policy of line {other.lineno}, which reduces in float32: a run reduces in half only where it "
                    "picks this mode over that one")
    return ""


# What `_half` says of a dtype, and the severity where it is not the catalog's (None).
Said = tuple[str, "Severity | None"]


def _advice(said: Said, verb: str) -> str:
    # a note on what no shipped config does tells how to make sure, rather than what to fix
    if said[1] is Severity.INFO:
        return "; `reduce_dtype=torch.float32` in the code would rule it out"
    return f"; {verb} `reduce_dtype=torch.float32`"


def _half(ctx: Context, expr: ast.AST | None, scope: ast.AST, say=describe_half) -> Said | None:
    """The half dtype `expr` names, said with the runs it holds in; None where it names none. A dtype the run
    chooses (``{...}[args.grad_precision or args.precision]``) is judged in the runs the project makes of the file
    (`Facts.dtypes_per_run`: its launch lines, or the run with the script's defaults), where they are known: none
    of them half, and a half reduce is only what a user may ask for. Where they are not, and the dtype is read
    from a config object (``DTYPES[cfg.fsdp.reduce_dtype]``), by what the project's YAML configs write for that key
    (`_by_configs`)."""
    dtypes = ctx.flow.dtype_of(expr, scope)
    if dtypes is not None and not dtypes & HALF:
        return None
    runs = ctx.facts.dtypes_per_run(expr, scope) if dtypes and dtypes - HALF else None
    if runs is None:
        configured = _configured(ctx, expr, scope)
        judged = _by_configs(*configured, dtypes) if configured is not None else None
        return judged if judged is not None or not dtypes else (say(dtypes), None)
    if any(d & HALF and d - HALF for _, d in runs):  # a run that may reduce either way: not known
        return say(dtypes), None
    return _in_runs(runs)


def _in_runs(runs: list[tuple[str | None, frozenset]]) -> Said | None:
    """The half dtype the project's runs reduce in, said with the runs that do (`Facts.dtypes_per_run`)."""
    half = [(where, d & HALF) for where, d in runs if d & HALF]
    if not half:
        return None
    named = describe(frozenset().union(*(d for _, d in half)))
    places = [where for where, _ in half if where is not None]
    if not places:
        return f"{named} in a run with the script's default options", None
    more = f" and {len(places) - 1} more" if len(places) > 1 else ""
    return f"{named} in the run `{places[0]}` starts{more}", None


# The dtypes a config value gives (None: not known), with the value and where it is written.
Configured = list[tuple[frozenset | None, ConfigValue]]


def _by_configs(path: tuple[str, ...], shipped: Configured, dtypes: frozenset | None) -> Said | None:
    """What the project's YAML configs say of a dtype read from the config key `path`: half in one of them, a
    warning that cites it; float32 (or wider) in every one, a note that a half reduce is only what a run may set;
    None where some value is not known (an interpolation, a name the table lacks) and none is half."""
    half = [(d & HALF, value) for d, value in shipped if d and d & HALF]
    if half:
        first = half[0][1]
        more = f", and {len(half) - 1} more config value{'s' if len(half) > 2 else ''}" if len(half) > 1 else ""
        named = describe(frozenset().union(*(d for d, _ in half)))
        return f"{named} where a run uses the project's config {first.where} (`{first.path[-1]}: {first.value}`{more})", None
    if not dtypes or any(not d for d, _ in shipped):
        return None
    wide = describe(frozenset().union(*(d for d, _ in shipped)))
    more = f" and {len(shipped) - 1} more" if len(shipped) > 1 else ""
    return (f"{describe(dtypes & HALF)} only where a run sets `{'.'.join(path)}` so: every YAML config of the project "
            f"that writes it says {wide} ({shipped[0][1].where}{more})"), Severity.INFO


def _configured(ctx: Context, expr: ast.AST | None, scope: ast.AST, depth: int = 0) -> tuple[tuple[str, ...], Configured] | None:
    """The key path a dtype expression reads from a config object, and the dtypes each value the project's YAML
    configs write for it gives: a table looked up by the value (``DTYPES[cfg.fsdp.reduce_dtype]``), torch's dtype
    of that name (``getattr(torch, cfg.dtype)``), or a name bound to either. None where the expression reads no
    config key, the configs write none for it, or the file's own code assigns that key."""
    values = ctx.project.config_values
    if values is None or expr is None or depth > 3:
        return None
    if isinstance(expr, ast.Subscript):
        table = ctx.flow.table_of(expr, scope)
        if table is None:
            return None
        entries = {k.value: v for k, v in zip(table.keys, table.values) if isinstance(k, ast.Constant)}
        return _read(ctx, expr.slice, scope, values, lambda v: ctx.flow.dtype_of(entries[v], scope) if v in entries else None)
    if _torch_getattr(ctx, expr):
        return _read(ctx, expr.args[1], scope, values, lambda v: TORCH_DTYPES.get(f"torch.{v}") if isinstance(v, str) else None)
    if not isinstance(expr, (ast.Name, ast.Attribute)):
        return None
    bound = ctx.src.bindings(expr, scope)
    found = [_configured(ctx, v, scope, depth + 1) if v is not None and v is not expr else None for _, v in bound]
    if not found or any(f is None for f in found):
        return None
    return found[0][0], [entry for f in found for entry in f[1]]  # type: ignore[index]


def _torch_getattr(ctx: Context, expr: ast.AST) -> bool:
    """``getattr(torch, name)``."""
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "getattr" \
        and len(expr.args) >= 2 and ctx.qualname(expr.args[0]) == "torch"


def _read(ctx: Context, key: ast.AST, scope: ast.AST, values: ConfigValues, dtype) -> tuple[tuple[str, ...], Configured] | None:
    """The configs' values for the config key `key` reads (through one name it is bound to), each with its dtype."""
    if isinstance(key, ast.Name):
        bound = ctx.src.bindings(key, scope)
        key = bound[0][1] if len(bound) == 1 and bound[0][1] is not None else key
    path = key_path(key)
    if path is None or path[-1] in stored_keys(ctx.src.assigns):
        return None
    found = values.lookup(path)
    return (path, [(dtype(v.value) if v.value is not None else None, v) for v in found]) if found else None


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
    if policy is None or policy.reduce not in HALF or world == 1 or facts.trains is False or deepspeed.switched_off(facts, at, "reduce"):
        return  # (a legacy `bfloat16` block the launcher switches off: the run reduces in what it asks; AMP001 says so)
    large = world is not None and world >= LARGE_WORLD
    size = f"{world} ranks" if world else "a world size the input does not fix"
    here = at("reduce")
    yield Hit(f"gradients are all-reduced in {policy.reduce} over {size}: every hop rounds, and the error grows with the ranks",
              here, severity=None if large else Severity.INFO, related=at.others(here, "world_size") if world else ())
