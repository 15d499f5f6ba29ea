"""AMP130 op-without-half-kernel: An op has no kernel for bf16/fp16 on this device, so the step fails where the half tensor reaches it.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP130`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import FLOAT_UP, HALF_WORDS, CodeHit, Context
from ampdoctor.lint.python.dataflow import HALF, describe
from ampdoctor.lint.python.resolve import tokens

# Decompositions and solvers: LAPACK/cuSOLVER have float and double only, so torch has no half kernel for them on
# any device ("linalg_svd_cpu" not implemented for 'BFloat16', "Low precision dtypes not supported").
_LINALG = frozenset(
    {f"torch.linalg.{n}" for n in ("svd", "svdvals", "qr", "eigh", "eig", "eigvals", "eigvalsh", "inv", "inv_ex", "solve",
                                   "solve_ex", "cholesky", "cholesky_ex", "lstsq", "det", "slogdet", "pinv", "lu", "lu_factor")}
    | {f"torch.{n}" for n in ("svd", "qr", "inverse", "cholesky", "det", "logdet", "pinverse", "svd_lowrank", "pca_lowrank")})
# Words of a module weight: a model's weights are half when the model is.
_WEIGHT_WORDS = frozenset({"weight", "weights"})


@code_check("AMP130", triggers=("linalg", "torch.svd", "torch.qr", "torch.inverse", "torch.cholesky", "svd_lowrank"),
            also=(HALF_WORDS,))
def decomposition_of_half_weights(ctx: Context) -> Iterator[CodeHit]:
    # peft PR #3410 and others: an SVD or solve of adapter or layer weights in code that handles half models; the
    # decomposition has no half kernel, and the code fails exactly for the fp16/bf16 models it was written for.
    for call in ctx.src.calls:
        name = ctx.qualname(call.func)
        if name not in _LINALG or not call.args:
            continue
        operand = call.args[0]
        scope = ctx.src.scope(call)
        dtypes = ctx.flow.tensor_dtype(operand, scope)
        if dtypes and dtypes <= FLOAT_UP:
            continue
        short = name.replace("torch.", "", 1)
        if dtypes and dtypes & HALF:
            yield call, f"`{short}` has no {describe(dtypes & HALF)} kernel on any device, and `{ast.unparse(operand)[:40]}` is {describe(dtypes & HALF)}; upcast with `.float()` first"
        elif _from_weights(ctx, operand, scope, 0):
            # a warning: the weights are half only when the model is, which this file allows but does not fix
            yield call, (f"`{short}` has no bf16/fp16 kernel on any device, and `{ast.unparse(operand)[:40]}` is built from layer "
                         "weights, which are half in a half-precision model (this file handles half dtypes); upcast with `.float()` first"), Severity.WARNING


def _from_weights(ctx: Context, expr: ast.AST, scope: ast.AST, hops: int) -> bool:
    """Is `expr` computed from a module's weights, with no upcast on the way (the last binding of each name)?
    `hops` counts the names followed back to their bindings: the expression's own structure is finite."""
    if isinstance(expr, ast.Call):
        if (ctx.flow.cast_dtype(expr, scope) or frozenset()) & FLOAT_UP:
            return False
        func = expr.func
        base = func.value if isinstance(func, ast.Attribute) else None
        return any(_from_weights(ctx, a, scope, hops) for a in ([base] if base is not None else []) + list(expr.args[:2]))
    if isinstance(expr, ast.BinOp):
        return _from_weights(ctx, expr.left, scope, hops) or _from_weights(ctx, expr.right, scope, hops)
    if isinstance(expr, ast.Subscript):
        return _from_weights(ctx, expr.value, scope, hops)
    if isinstance(expr, ast.Attribute):
        return bool(tokens(expr.attr) & _WEIGHT_WORDS) or _from_weights(ctx, expr.value, scope, hops)
    if isinstance(expr, ast.Name) and hops < 4:
        before = [b for b in ctx.src.bindings(expr, scope) if b[0] < getattr(expr, "lineno", 0)]
        if not before or before[-1][1] is None:
            return False
        return _from_weights(ctx, before[-1][1], scope, hops + 1)
    return False
