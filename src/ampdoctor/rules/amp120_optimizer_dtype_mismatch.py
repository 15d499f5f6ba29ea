"""AMP120 optimizer-dtype-mismatch: The optimizer expects a different parameter, gradient or state dtype than it is given.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP120`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, policy_check
from ampdoctor.facts import RunFacts
from ampdoctor.lint.python.context import CodeHit, Context, parameter_loops
from ampdoctor.lint.python.dataflow import describe
from ampdoctor.lint.python.optimizers import steps_over
from ampdoctor.lint.python.resolve import access_path, argument
from ampdoctor.policy import Policy


@policy_check("AMP120")
def optimizer_dtype_mismatch(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # SimpleTuner #755: an optimizer that insists on one parameter dtype.
    required = facts.optimizer_requires
    if policy is None or required is None or policy.params == required:
        return
    here = at("optimizer")
    if facts.optimizer_retypes is False:
        yield Hit(f"optimizer {facts.optimizer!r} needs {required} weights but they are {policy.params} ('AssertionError: only bfloat 16 is "
                  "supported.')", here, related=at.others(here, "params", "optimizer_retypes"))
    elif facts.optimizer_retypes:
        # This version casts the trained weights to what the optimizer needs: the run trains them in that dtype.
        yield Hit(f"optimizer {facts.optimizer!r} needs {required} weights but they are {policy.params}: this version of the framework "
                  f"casts the trained weights to {required} for it, so they train in {required}", here, severity=Severity.INFO,
                  related=at.others(here, "params", "optimizer_retypes"))
    else:
        yield Hit(f"optimizer {facts.optimizer!r} needs {required} weights but they are {policy.params}: some versions of the framework "
                  f"let it fail ('AssertionError: only bfloat 16 is supported.'), later ones cast the trained weights to {required}",
                  here, severity=Severity.WARNING, related=at.others(here, "params"))


@code_check("AMP120", triggers=("fully_shard",), also=((".data",),), reads_configs=False)
def parameter_retyped_after_fully_shard(ctx: Context) -> Iterator[CodeHit]:
    # accelerate PR #3905: `p.data = p.data.to(torch.float32)` after `fully_shard`. The parameters are DTensor shards
    # by then, with their dtype fixed in FSDP2's sharded storage; the new `.data` leaves that storage behind and
    # `optimizer.step()` fails on the DTensor. The cast belongs before `fully_shard` (accelerate #3979).
    shards = [c for c in ctx.src.calls if _is_fully_shard(ctx.qualname(c.func))]
    if not shards:
        return
    for loop, name in parameter_loops(ctx):
        fn = ctx.src.enclosing_function(loop)
        module = access_path(loop.iter.func.value)  # `model` of `model.parameters()`: sharded, or holding what was
        shard = next((c for c in shards if c.lineno < loop.lineno and ctx.src.enclosing_function(c) is fn
                      and not ctx.src.exclusive(c, loop) and _within(access_path(argument(c, 0, "module")), module)), None)
        if shard is None:
            continue
        failing, _ = steps_over(ctx, {".".join(module)} if module else set())
        for stmt in ast.walk(loop):
            dtypes = _data_retype(ctx, stmt, name)
            if dtypes:
                yield _retyped_hit(stmt, name, dtypes, shard, failing)


def _retyped_hit(stmt: ast.AST, name: str, dtypes: frozenset, shard: ast.Call, failing: str | None) -> CodeHit:
    """torch 2.13, checked on CPU (gloo, one rank): the forward still all-gathers the shards in the dtype they were
    sharded in (an input in the new dtype fails there: "mat1 and mat2 must have the same dtype"), so the gradients
    come back in that dtype, and the step fails with an optimizer that refuses the mixed pair (AdamW: "expected dtype
    ... for `end`"); SGD steps it."""
    head = (f"`{name}.data` is retyped to {describe(dtypes)} after `fully_shard` (line {shard.lineno}): the parameters are FSDP2's "
            "DTensor shards by then, whose forward still gathers the dtype they were sharded in, so their gradients do not match the new dtype")
    if failing:
        return stmt, f"{head} and `{failing}.step()` (built over them here) fails on the mixed pair; cast the module before `fully_shard`"
    return stmt, (f"{head}: Adam-family or fused optimizers then fail at `step()`, SGD does not; cast the module before "
                  "`fully_shard`"), Severity.WARNING


def _within(sharded: tuple[str, ...], module: tuple[str, ...]) -> bool:
    """The module sharded is the one whose parameters are looped over, or lies inside it, or holds it."""
    n = min(len(sharded), len(module))
    return n > 0 and sharded[:n] == module[:n]


def _is_fully_shard(name: str | None) -> bool:
    """FSDP2's `fully_shard`, from `torch.distributed.fsdp` or the `_composable` module it was first public in."""
    return bool(name) and name.startswith("torch.distributed.") and name.endswith(".fully_shard")


def _data_retype(ctx: Context, stmt: ast.AST, name: str) -> frozenset | None:
    """``p.data = p.data.to(torch.float32)``: the dtype a parameter's `.data` is replaced in."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call)):
        return None
    target = stmt.targets[0]
    if not (isinstance(target, ast.Attribute) and target.attr == "data" and isinstance(target.value, ast.Name)
            and target.value.id == name):
        return None
    return ctx.flow.cast_dtype(stmt.value, ctx.src.scope(stmt))
