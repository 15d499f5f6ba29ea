"""AMP128 mixed-precision-without-master-weights: Autocast mixed precision is on, but the trainable parameters are already bf16, so there is no fp32 master copy.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP128`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.registry import Hit, code_check, policy_check, runtime_check
from ampdoctor.facts import RunFacts, half_weights_without_master
from ampdoctor.lint.python.context import FLOAT_UP, CodeHit, Context, parameter_loops
from ampdoctor.policy import Policy

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


@policy_check("AMP128")
def mixed_precision_without_master_weights(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # litgpt #1252: "mixed precision" over weights that are already half: no fp32 master copy.
    if not half_weights_without_master(policy, facts) or not facts.autocast:
        return
    assert policy is not None
    here = at("autocast")
    yield Hit(f"mixed precision is on ({policy.compute} autocast) but the trainable weights are already {policy.params}: "
              "there is no fp32 master copy, so small updates round away", here, related=at.others(here, "params"))


@code_check("AMP128", triggers=("parameters(",), also=((".float()", "float32", "torch.float"),), reads_configs=False)
def master_upcast_rebinds_loop_variable(ctx: Context) -> Iterator[CodeHit]:
    # accelerate #3979: the fp32 master-weight upcast `param = param.to(torch.float32)` in a loop over the model's
    # parameters makes a new tensor and binds it to the loop variable; the model keeps its half parameters.
    for loop, name in parameter_loops(ctx):
        for stmt in _body_statements(loop):
            if _rebinds_to_upcast(ctx, stmt, name) and not _read_after(loop, name, stmt):
                yield stmt, (f"`{ast.unparse(stmt)[:60]}` only rebinds the loop variable: the model's parameter keeps its "
                             "half dtype, so there is no fp32 master copy; assign `.data` (or cast the module) instead")


def _body_statements(loop: ast.For) -> Iterator[ast.stmt]:
    """The statements a loop body runs each iteration, nested blocks included, functions and classes not."""
    todo = list(loop.body)
    while todo:
        stmt = todo.pop(0)
        yield stmt
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            todo += [c for c in ast.iter_child_nodes(stmt) if isinstance(c, ast.stmt)]


def _rebinds_to_upcast(ctx: Context, stmt: ast.stmt, name: str) -> bool:
    """``p = p.to(torch.float32)`` / ``p = p.float()``: the loop variable bound to an fp32 copy of itself."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id == name and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == name):
        return False
    dtypes = ctx.flow.cast_dtype(stmt.value, ctx.src.scope(stmt))
    return bool(dtypes) and dtypes <= FLOAT_UP


def _read_after(loop: ast.For, name: str, stmt: ast.stmt) -> bool:
    """Is the rebound name read later in the body (stored, passed on, registered): then the copy is used."""
    end = stmt.end_lineno or stmt.lineno
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and n.lineno > end
               for s in loop.body for n in ast.walk(s))


@runtime_check("AMP128")
def autocast_over_half_weights_lost_updates(ctx: RuntimeContext) -> Iterator[Hit]:
    """Autocast ran over half-precision weights and the optimizer step measurably lost updates."""
    facts, observed = ctx.observed.facts, ctx.observed.policy
    if not facts.autocast or observed is None or not half_weights_without_master(observed, facts):
        return
    for share, where, details in ctx.rounded_updates():
        yield Hit(f"mixed precision is on ({observed.compute} autocast) but the trainable weights are already {observed.params}: "
                  f"{share:.1%} of their elements with a non-zero gradient did not change in {details['optimizer']}.step() "
                  "(updates below half an ulp round away)", where, details=details)
