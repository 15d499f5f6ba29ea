"""AMP110 custom-function-without-custom-fwd: A custom autograd Function or extension op is not covered by autocast and receives mixed dtypes.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP110`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.facts import disables_autocast, reenters_autocast
from ampdoctor.lint.python.resolve import method


def _decorated(fn: ast.FunctionDef, ctx: Context, wanted: str) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = ctx.qualname(target) or (target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
        if name.rsplit(".", 1)[-1] == wanted:
            return True
    return False


def _disables_autocast(fn: ast.FunctionDef, ctx: Context) -> bool:
    return any(isinstance(node, ast.Call) and disables_autocast(node, ctx.src) for node in ast.walk(fn))


def _returns_its_input(fn: ast.FunctionDef) -> bool:
    """Every `return` of the forward hands back one of its arguments untouched (``return x``, x never rebound): an
    identity whose backward alone does the work (a gradient hook, a loss added through backward). No op of its
    output runs in the forward for autocast to cast, and its backward sees the gradient in the output's dtype."""
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args)[1:]}  # not `ctx`
    rebound = {t.id for node in ast.walk(fn) if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
               for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}
    returns = [node for node in ast.walk(fn) if isinstance(node, ast.Return)]
    return bool(returns) and all(isinstance(r.value, ast.Name) and r.value.id in params - rebound for r in returns)


@code_check("AMP110", triggers=("Function",), also=(("autocast", "mixed_precision", "precision=", "bf16=", "fp16="),), project=True)
def custom_function_without_custom_fwd(ctx: Context) -> Iterator[CodeHit]:
    # pytorch #38487: autocast does not reach inside a custom Function, so its kernels see mixed dtypes.
    local = ctx.facts.half_autocast
    if local is not None:
        where = f"this file runs under autocast (line {local.lineno})"
    elif ctx.project.autocast is not None:
        where = f"the project runs it under {ctx.project.autocast.describe()}"
    else:
        return
    for cls in ctx.src.classes:
        if not any(ctx.qualname(b) == "torch.autograd.Function" for b in cls.bases):
            continue
        backward, forward = method(cls, "backward"), method(cls, "forward")
        if backward is not None and reenters_autocast(backward, ctx.src):
            continue  # the backward replays the autocast state by hand (an activation checkpoint): what custom_fwd does
        if forward is not None and not _decorated(forward, ctx, "custom_fwd") and not _disables_autocast(forward, ctx) \
                and not _returns_its_input(forward):
            yield forward, (f"`{cls.name}.forward` has no `custom_fwd` and {where}: autocast does not cast its inputs, "
                            "which arrive in whatever dtypes the ops before it left (mixed, where those disagree), and its "
                            "backward runs outside autocast")

