"""AMP133 mask-fill-overflow: A mask fill constant overflows the half dtype of the tensor it is written into.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP133`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Tag
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.dtypes import BF16, FP16, name_of
from ampdoctor.lint.python.context import CodeHit, Context, in_half_module
from ampdoctor.lint.python.dataflow import FP32, FP64, HALF, describe
from ampdoctor.lint.python.resolve import argument, keyword

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext

# The magnitude from which a number rounds to inf in each half dtype (the largest finite value plus half an ulp).
INF_AT = {FP16: 65520.0, BF16: 2.0 ** 128 * (1 - 2.0 ** -9)}
_FILL_METHODS = ("masked_fill", "masked_fill_", "fill_")


def overflowed(value: float) -> frozenset:
    """The half dtypes in which a finite `value` becomes inf."""
    return frozenset(d for d, limit in INF_AT.items() if abs(value) >= limit and value not in (float("inf"), float("-inf")))


def constant_value(ctx: Context, expr: ast.AST | None, depth: int = 0) -> float | None:
    """A number the code writes: ``-1e9``, ``torch.finfo(torch.float32).min`` (negated, or via a module constant);
    None for what depends on a tensor (``torch.finfo(x.dtype).min``) or is unknown."""
    if expr is None or depth > 3:
        return None
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool):
        return float(expr.value)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        inner = constant_value(ctx, expr.operand, depth + 1)
        return None if inner is None else -inner
    if isinstance(expr, ast.Attribute):
        return _wide_finfo_bound(ctx, expr)
    if isinstance(expr, ast.Name):
        bound = ctx.src.bindings(expr, ctx.src.scope(expr))
        values = {constant_value(ctx, v, depth + 1) for _, v in bound if v is not None}
        if len(bound) == 1 and len(values) == 1:
            return values.pop()
    return None


def _wide_finfo_bound(ctx: Context, expr: ast.Attribute) -> float | None:
    """``torch.finfo(torch.float32).min`` -> -3.4e38 (and float64's bounds): numbers beyond every half dtype."""
    if expr.attr not in ("min", "max") or not isinstance(expr.value, ast.Call):
        return None
    finfo = expr.value
    if ctx.qualname(finfo.func) != "torch.finfo" or not finfo.args:
        return None
    wide = ctx.flow.dtype_of(finfo.args[0], ctx.src.scope(expr))
    bound = {FP32: 3.4028234663852886e38, FP64: 1.7976931348623157e308}.get(wide) if wide and len(wide) == 1 else None
    if bound is None:
        return None
    return -bound if expr.attr == "min" else bound


def _fill_sites(ctx: Context) -> Iterator[tuple[ast.Call, ast.AST, ast.AST | None, str]]:
    """(call, fill value, the tensor it is written into or None, how) for masked_fill/fill_/full/full_like/where."""
    for call in ctx.src.calls:
        func = call.func
        name = ctx.qualname(func)
        if isinstance(func, ast.Attribute) and name is None and func.attr in _FILL_METHODS:
            value = argument(call, 0, "value") if func.attr == "fill_" else argument(call, 1, "value")
            yield call, value, func.value, func.attr
        elif name == "torch.masked_fill":
            yield call, argument(call, 2, "value"), argument(call, 0, "input"), "masked_fill"
        elif name in ("torch.full", "torch.full_like"):
            value = argument(call, 1, "fill_value")
            target = None if name == "torch.full" else argument(call, 0, "input")
            yield call, value, target, name.split(".")[1]
        elif name == "torch.where" and len(call.args) == 3:
            for value, other in ((call.args[1], call.args[2]), (call.args[2], call.args[1])):
                yield call, value, other, "where"


def _written_dtypes(ctx: Context, call: ast.Call, target: ast.AST | None, how: str) -> tuple[frozenset | None, str]:
    """The dtypes the value is written in, and what says so."""
    explicit = keyword(call, "dtype")
    if explicit is not None:
        return ctx.flow.dtype_of(explicit, ctx.src.scope(call)), "its dtype="
    if how == "full":
        return None, ""
    found = ctx.flow.tensor_dtype(target, ctx.src.scope(call))
    if found:
        return found, f"`{ast.unparse(target)[:40]}` is {describe(found)}"
    cast = in_half_module(ctx, call) if how != "full_like" else None
    if cast is not None and ctx.facts.fp32_head is None:
        return cast.dtypes, f"the model is cast to {describe(cast.dtypes)} (line {cast.node.lineno}) without autocast"
    return None, ""


# Triggers: a constant beyond fp16's 65504 (1e5 and up) or float32's own bounds; `finfo(dtype).min` of the tensor's
# own dtype is the correct fill and, alone, is no reason to parse a file.
@code_check("AMP133", triggers=("masked_fill", "fill_", "full", "where"),
            also=(("e9", "e10", "e5", "e6", "e7", "e8", "e38", "finfo(torch.float", "finfo(float", "float32).m", "MIN", "MAX", "NEG"),))
def mask_fill_overflow(ctx: Context) -> Iterator[CodeHit]:
    # transformers PR #17306, fairseq #3575: -1e9 / finfo(float32).min written into fp16 attention scores.
    flagged: set[ast.Call] = set()
    for call, value_node, target, how in _fill_sites(ctx):
        if call in flagged:
            continue
        value = constant_value(ctx, value_node)
        if value is None or not (bad := overflowed(value)):
            continue
        dtypes, why = _written_dtypes(ctx, call, target, how)
        if not dtypes or not dtypes & HALF or not dtypes & HALF <= bad:
            continue  # every half dtype it may run in must overflow: bf16 holds -1e9
        what = "silently becomes -inf, and a fully masked row then gives NaN in softmax" if how == "where" else \
            "raises 'value cannot be converted to type ... without overflow'"
        yield call, (f"{how} writes {ast.unparse(value_node)[:40]} into {describe(dtypes & HALF)} ({why}), where it {what}; "
                     "use `torch.finfo(<tensor>.dtype).min`")
        flagged.add(call)


@runtime_check("AMP133")
def fill_became_inf(ctx: RuntimeContext) -> Iterator[Hit]:
    """A finite constant that came out infinite in a half tensor: a Python number (``torch.where(mask, -1e9, scores)``)
    or an fp32 mask filled with float32's min, with a fully masked row, cast to half. A warning: the step runs on, and
    only fully masked rows turn NaN (the crash of masked_fill is the error the catalog names)."""
    t = ctx.trace
    for op in t.tagged(Tag.FILL):
        value, dtype, how = op.extra[1], op.extra[2], op.extra[3]
        what = "is written into" if how == "fill" else "is cast, in a float32 tensor, to"
        yield Hit(f"the constant {value:g} {what} {name_of(dtype)}, where it becomes {'-' if value < 0 else ''}inf "
                  "(a fully masked row then gives NaN in softmax)", t.location(op.seq), severity=Severity.WARNING)
        return
