"""AMP128 mixed-precision-without-master-weights: Autocast mixed precision is on, but the trainable parameters are already bf16, so there is no fp32 master copy.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP128`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.registry import Hit, code_check, policy_check, runtime_check
from ampdoctor.facts import RunFacts, half_weights_without_master
from ampdoctor.lint.python.context import FLOAT_UP, GRAD_SCALERS, HALF_WORDS, PEFT_FUNCTIONS, CodeHit, Context, calls_named, parameter_loops
from ampdoctor.lint.python.dataflow import describe
from ampdoctor.lint.python.facts import AUTOCASTS, ModelCast, autocast_argument, disables_autocast
from ampdoctor.lint.python.optimizers import PLAIN_OPTIMIZERS, overlap, parameter_roots, stepped, wrapped_in_master
from ampdoctor.lint.python.resolve import dotted
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
    for loop, name in parameter_loops(ctx, selections=True):
        for stmt in _body_statements(loop):
            if _rebinds_to_upcast(ctx, stmt, name) and not _read_after(loop, name, stmt):
                yield stmt, (f"`{ast.unparse(stmt)[:60]}` only rebinds the loop variable: the model's parameter keeps its "
                             "half dtype, so there is no fp32 master copy; assign `.data` (or cast the module) instead")
            elif _discards_upcast(ctx, stmt, name):
                yield stmt, (f"`{ast.unparse(stmt)[:60]}` makes an fp32 copy and drops it: a tensor's `.float()`/`.to()` "
                             "returns a new tensor, so the model's parameter keeps its half dtype and there is no fp32 "
                             f"master copy; assign it (`{name}.data = {name}.data.float()`) or cast the module")


@code_check("AMP128", triggers=("autocast",), also=(HALF_WORDS, ("optim",)), reads_configs=False)
def optimizer_of_half_model_under_autocast(ctx: Context) -> Iterator[CodeHit]:
    # A training script casts its model to half (`model.to(torch.bfloat16)`), hands `model.parameters()` to a plain
    # optimizer and runs the forward under `torch.autocast(dtype=torch.bfloat16)`: autocast's mixed precision assumes
    # fp32 weights, and here the optimizer steps the half ones, so updates below half an ulp round away.
    autocast = _half_autocast(ctx)
    if autocast is None or any(ctx.qualname(c.func) in PEFT_FUNCTIONS for c in ctx.src.calls):
        return
    scaled = any(ctx.qualname(c.func) in GRAD_SCALERS for c in ctx.src.calls)
    for call, name in calls_named(ctx, PLAIN_OPTIMIZERS):
        cast = _trains_cast_model(ctx, call)
        if cast is None or scaled and "fp16" in cast.dtypes or not stepped(ctx, call) or wrapped_in_master(ctx, call):
            continue  # fp16 weights with a loss scaler are AMP105's
        yield call, (f"`{name.rsplit('.', 1)[-1]}` steps the parameters of `{cast.name}`, cast to {describe(cast.dtypes)} "
                     f"(line {cast.node.lineno}), while the forward runs under the autocast of line {autocast.lineno}: "
                     "autocast's mixed precision expects fp32 weights, and there is no fp32 master copy, so small updates "
                     f"round away; keep `{cast.name}` fp32 and let autocast compute in {describe(cast.dtypes)}")


def _half_autocast(ctx: Context) -> ast.Call | None:
    """A ``torch.autocast`` of the file given a half dtype outright and not disabled."""
    for call, name in calls_named(ctx, AUTOCASTS):
        dtypes = ctx.flow.dtype_of(autocast_argument(call, name, "dtype"))
        if dtypes and dtypes <= {"bf16", "fp16"} and not disables_autocast(call, ctx.src):
            return call
    return None


def _trains_cast_model(ctx: Context, call: ast.Call) -> ModelCast | None:
    """The half cast (before the optimizer, in its scope) of a model whose parameters the optimizer takes, with no
    cast of it back to fp32 in between."""
    roots = parameter_roots(ctx, call) or set()
    for cast in ctx.facts.model_casts:
        if not cast.name or cast.node.lineno >= call.lineno or ctx.src.scope(cast.node) is not ctx.src.scope(call):
            continue
        if any(overlap(cast.name, root) for root in roots) and not _upcast_between(ctx, cast, call):
            return cast
    return None


def _upcast_between(ctx: Context, cast: ModelCast, call: ast.Call) -> bool:
    """``model.float()`` (or a part of it: ``model.lm_head.float()``) between the cast and the optimizer."""
    for other in ctx.src.calls:
        func = other.func
        if isinstance(func, ast.Attribute) and cast.node.lineno < other.lineno < call.lineno and overlap(dotted(func.value) or "", cast.name or ""):
            if (ctx.flow.cast_dtype(other) or frozenset()) & FLOAT_UP:
                return True
    return False


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


def _discards_upcast(ctx: Context, stmt: ast.stmt, name: str) -> bool:
    """``p.float()`` / ``p.data.to(torch.float32)`` as a statement of its own: the upcast copy is made and thrown away."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute)):
        return False
    owner = stmt.value.func.value
    if isinstance(owner, ast.Attribute) and owner.attr == "data":
        owner = owner.value
    if not (isinstance(owner, ast.Name) and owner.id == name):
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
