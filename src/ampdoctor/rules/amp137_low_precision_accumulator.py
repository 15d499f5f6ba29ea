"""AMP137 low-precision-accumulator: A running sum of losses or metrics is kept in a bf16/fp16 tensor, so it stops growing.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP137`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Tag
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.lint.python.context import HALF_WORDS, CodeHit, Context
from ampdoctor.lint.python.dataflow import HALF, describe
from ampdoctor.lint.python.resolve import dotted, last_identifier, tokens

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext

# What a running sum of losses or metrics is called; a residual stream or an expert mixture summed in a model's
# forward is not a logged total and is left alone.
SUM_WORDS = frozenset({
    "loss", "losses", "total", "sum", "running", "metric", "metrics", "correct", "accuracy", "nll", "ppl", "tr",
    "epoch", "avg", "cum", "cumulative",
})
NOT_SUMS = frozenset({"hidden", "states", "state", "out", "output", "outputs", "x", "h", "residual", "weight", "grad", "grads"})
LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _increments(ctx: Context) -> Iterator[tuple[ast.AST, ast.AST, ast.AST | None]]:
    """(statement, accumulator expression, increment) of ``acc += x``, ``acc = acc + x`` and ``acc.add_(x)``."""
    for node in ctx.src.additions:
        if isinstance(node, ast.AugAssign):
            yield node, node.target, node.value
            continue
        stmt = ctx.src.parents.get(node)
        if isinstance(stmt, ast.Assign) and stmt.value is node and len(stmt.targets) == 1 \
                and dotted(node.left) == dotted(stmt.targets[0]) is not None:
            yield stmt, stmt.targets[0], node.right
    for call in ctx.src.calls:
        if isinstance(call.func, ast.Attribute) and call.func.attr == "add_" and ctx.qualname(call.func) is None:
            yield call, call.func.value, call.args[0] if call.args else None


def _is_sum_name(name: str) -> bool:
    words = tokens(name)
    return bool(words & SUM_WORDS) and not words & NOT_SUMS


def _loop_of(ctx: Context, node: ast.AST) -> ast.AST | None:
    for parent in ctx.src.ancestors(node):
        if isinstance(parent, LOOPS):
            return parent
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return None
    return None


def _initial_dtypes(ctx: Context, target: ast.AST, loop: ast.AST) -> tuple[frozenset | None, ast.AST | None]:
    """The dtype of the accumulator as the loop finds it: its last binding before the loop, outside it."""
    base = target.value if isinstance(target, ast.Subscript) else target
    if not isinstance(base, (ast.Name, ast.Attribute)):
        return None, None
    scope = ctx.src.scope(loop)
    inside = {id(n) for n in ast.walk(loop)}
    before = [(line, value) for line, value in ctx.src.bindings(base, scope) if line < loop.lineno and value is not None]
    if not before:
        return None, None
    line, value = before[-1]
    if id(value) in inside:
        return None, None
    return ctx.flow.tensor_dtype(value, scope), value


def _model_output(ctx: Context, expr: ast.AST, scope: ast.AST, depth: int = 0) -> bool:
    """What a half-cast model returned: the dataflow calls it half, but a model that computes its own loss often
    upcasts the logits first (``F.cross_entropy(logits.float(), ...)``), so its loss is fp32."""
    if isinstance(expr, ast.Call):
        return isinstance(expr.func, ast.Name) and expr.func.id in ctx.flow.half_models
    if isinstance(expr, ast.Name) and depth < 3:
        before = [v for line, v in ctx.src.bindings(expr, scope) if line <= getattr(expr, "lineno", 0) and v is not None]
        return bool(before) and _model_output(ctx, before[-1], scope, depth + 1)
    return False


@code_check("AMP137", triggers=HALF_WORDS, also=(("+=", "add_(", "+ "),))
def low_precision_accumulator(ctx: Context) -> Iterator[CodeHit]:
    # transformers PR #8561: a bf16 `tr_loss` stopped growing once its increments fell below half an ulp.
    seen: set[str] = set()
    for stmt, target, increment in _increments(ctx):
        base = target.value if isinstance(target, ast.Subscript) else target
        name = dotted(base)
        if name is None or name in seen or not _is_sum_name(last_identifier(base) or ""):
            continue
        loop = _loop_of(ctx, stmt)
        if loop is None:
            continue
        dtypes, made = _initial_dtypes(ctx, target, loop)
        if made is not None and isinstance(made, ast.Constant) and increment is not None:
            # `total = 0.0` then `total += loss`: the sum becomes a tensor of the increment's dtype
            dtypes = ctx.flow.tensor_dtype(increment, ctx.src.scope(stmt))
            if dtypes and dtypes <= HALF and not _model_output(ctx, increment, ctx.src.scope(stmt)):
                seen.add(name)
                yield stmt, (f"`{name}` starts as a Python number and sums {describe(dtypes)} tensors, so it becomes a "
                             f"{describe(dtypes)} tensor that stops growing; add `.item()` or `.float()`")
            continue
        if not dtypes or not dtypes & HALF:
            continue
        seen.add(name)
        yield stmt, (f"`{name}` is a {describe(dtypes & HALF)} accumulator (line {made.lineno}) summed across iterations; "
                     f"once the increments are below half its resolution the sum stops growing; keep it in fp32")


# A running sum is reported when this share of its increments, measured as they were added, counted for nothing.
LOST_SHARE = 0.1


@runtime_check("AMP137")
def running_sum_stopped(ctx: RuntimeContext) -> Iterator[Hit]:
    """In-place adds into a small half-precision tensor outside the model, backward and optimizer step (a running
    loss or metric) whose increments were below half a unit in the last place of the sum: they were dropped."""
    t = ctx.trace
    for seq, lost, considered in t.tallied(Tag.RUNNING_SUM):
        if considered and lost / considered >= LOST_SHARE:
            yield Hit(f"{lost} of {considered} increments of a half-precision running sum were below half a unit in its "
                      f"last place and were dropped: the sum stopped growing", t.location(seq),
                      details={"dropped_increments": lost, "increments": considered})
