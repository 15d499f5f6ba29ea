"""AMP133 mask-fill-overflow: A mask fill constant overflows the half dtype of the tensor it is written into.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP133`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Tag
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.dtypes import BF16, FP16, name_of
from ampdoctor.lint.python.context import MATMUL_CALLS, CodeHit, Context, construction_only, in_half_module
from ampdoctor.lint.python.dataflow import FP32, FP64, HALF, describe
from ampdoctor.lint.python.kind import runs_training_loop
from ampdoctor.lint.python.resolve import argument, dotted, keyword, last_identifier, tokens

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
    if construction_only(ctx, ctx.src.enclosing_function(call)):
        # a tensor a module's __init__ makes and fills (a causal bias buffer) is fp32 then: the model's half cast and
        # the autocast of its forward come after it is built
        return None, ""
    cast = in_half_module(ctx, call) if how != "full_like" else None
    if cast is not None and ctx.facts.fp32_head is None:
        return cast.dtypes, f"the model is cast to {describe(cast.dtypes)} (line {cast.node.lineno}) without autocast"
    # an fp32 island (``with autocast(enabled=False)``) inside the autocast computes its product in fp32
    autocast = _autocast_of(ctx, call) if not ctx.facts.autocast_off_at(call) else None
    if autocast is not None and target is not None and _matmul_product(ctx, target, call.lineno):
        dtypes, where = autocast
        return dtypes or HALF, f"`{ast.unparse(target)[:40]}` is a matmul product, which autocast computes in half precision ({where})"
    return None, ""


def _may_be_fp16(ctx: Context, call: ast.Call, target: ast.AST | None, how: str) -> str | None:
    """Why a tensor whose dtype the code does not fix may be fp16 where `call` fills it (None: nothing says so, or
    something says it is not): the file or the project runs fp16, or it is attention scores (a matmul product), which
    fp16 autocast computes in fp16 wherever the model is run under it. Only masked_fill raises on the overflow; a
    tensor a module fills while it is built, or one in an fp32 island, is fp32."""
    if how not in ("masked_fill", "masked_fill_") or target is None or _promoted_mask(target):
        return None
    if construction_only(ctx, ctx.src.enclosing_function(call)) or ctx.facts.autocast_off_at(call):
        return None
    if ctx.facts.half_autocasts:
        return None  # the file bounds its own autocast, and `_written_dtypes` found it does not reach this fill
    precisions = ctx.project.precisions & HALF
    if precisions and FP16 not in precisions or ctx.facts.bf16_evidence is not None and not ctx.facts.fp16_possible:
        return None  # this code runs in bf16, which holds the constant
    if ctx.facts.fp16_possible:
        return "this file runs fp16 code"
    if FP16 in precisions:
        evidence = ctx.project.autocast or ctx.project.half_model or ctx.project.half
        # without a context that reaches this file, the fp16 is a training config's of the project (`precisions`)
        return f"this project runs it in fp16 ({evidence.describe()})" if evidence is not None else "a training config of this project runs fp16"
    if _matmul_product(ctx, target, call.lineno) and not runs_training_loop(ctx.src.text):
        # (a file that trains the model itself, with no autocast, has chosen its precision)
        return "it is a matmul product (attention scores), which fp16 autocast computes in fp16"
    return None


def _promoted_mask(expr: ast.AST) -> bool:
    """``attention_mask * 1.0``: a boolean mask times a Python number, which torch makes a tensor of the default
    float dtype (fp32) whatever the model runs in."""
    if not isinstance(expr, ast.BinOp) or not isinstance(expr.op, (ast.Mult, ast.Add)):
        return False
    for number, other in ((expr.left, expr.right), (expr.right, expr.left)):
        if isinstance(number, ast.Constant) and isinstance(number.value, float) and "mask" in tokens(last_identifier(other) or ""):
            return True
    return False


def _autocast_of(ctx: Context, call: ast.Call) -> tuple[frozenset, str] | None:
    """The half autocast the fill runs under (its dtypes, where; no dtypes when it does not say which): one the file
    enters around it or around code that calls it, or one a training file of the project runs it under."""
    node = ctx.facts.half_autocast_reaching([call])
    if node is not None:
        return ctx.facts.autocast_dtypes(node), f"line {node.lineno}"
    evidence = ctx.project.autocast
    return (frozenset(evidence.dtypes & HALF), evidence.describe()) if evidence is not None else None


def _matmul_product(ctx: Context, expr: ast.AST, line: int, depth: int = 0) -> bool:
    """Is `expr` the result of a matmul (``q @ k.transpose(-2, -1)``, ``torch.matmul``, ``einsum``), directly or as
    the value its name was last bound to before `line`? Autocast runs those in its half dtype."""
    if depth > 2:
        return False
    if isinstance(expr, ast.BinOp):
        return isinstance(expr.op, ast.MatMult) or (isinstance(expr.op, (ast.Mult, ast.Div))
                                                    and _matmul_product(ctx, expr.left, line, depth + 1))
    if isinstance(expr, ast.Call):
        return ctx.qualname(expr.func) in MATMUL_CALLS or (isinstance(expr.func, ast.Attribute) and expr.func.attr in ("matmul", "bmm"))
    if isinstance(expr, ast.Name):
        before = [(n, v) for n, v in ctx.src.bindings(expr, ctx.src.scope(expr)) if n < line and v is not None]
        return bool(before) and _matmul_product(ctx, before[-1][1], before[-1][0], depth + 1)
    return False


# Triggers: a constant beyond fp16's 65504 (1e5 and up) or float32's own bounds; `finfo(dtype).min` of the tensor's
# own dtype is the correct fill and, alone, is no reason to parse a file.
@code_check("AMP133", triggers=("masked_fill", "fill_", "full", "where"),
            also=(("e9", "e10", "e5", "e6", "e7", "e8", "e38", "finfo(torch.float", "finfo(float", "float32).m", "MIN", "MAX", "NEG"),),
            project=True)
def mask_fill_overflow(ctx: Context) -> Iterator[CodeHit]:
    # transformers PR #17306, fairseq #3575: -1e9 / finfo(float32).min written into fp16 attention scores.
    flagged: set[ast.Call] = set()
    for call, value_node, target, how in _fill_sites(ctx):
        if call in flagged:
            continue
        value = constant_value(ctx, value_node)
        if value is None or not (bad := overflowed(value)):
            continue
        written = (ast.get_source_segment(ctx.src.text, value_node) or ast.unparse(value_node))[:40]
        if not isinstance(value_node, (ast.Constant, ast.UnaryOp)):
            written += f" ({value:g})"  # a name or finfo bound: the number it stands for
        dtypes, why = _written_dtypes(ctx, call, target, how)
        if dtypes is None and FP16 in bad and (maybe := _may_be_fp16(ctx, call, target, how)) is not None:
            # the dtype is not fixed here: a note of what fails where it is fp16, and why it may be
            yield call, (f"{how} writes {written} into `{ast.unparse(target)[:40]}`, whose dtype "
                         f"this code does not fix; {maybe}, and float16 holds at most 65504: there the fill raises "
                         f"'value cannot be converted to type at::Half without overflow'. `torch.finfo("
                         f"{ast.unparse(target)[:40]}.dtype).min` holds in every dtype"), Severity.INFO
            flagged.add(call)
            continue
        if not dtypes or not dtypes & HALF or not dtypes & HALF <= bad:
            continue  # every half dtype it may run in must overflow: bf16 holds -1e9
        what = "silently becomes -inf, and a fully masked row then gives NaN in softmax" if how == "where" else \
            "raises 'value cannot be converted to type ... without overflow'"
        # `torch.where` raises nothing: the constant rounds to -inf, which only a fully masked row turns into NaN.
        yield call, (f"{how} writes {written} into {describe(dtypes & HALF)} ({why}), where it {what}; "
                     "use `torch.finfo(<tensor>.dtype).min`"), Severity.WARNING if how == "where" else None
        flagged.add(call)


# What brings a sum of masks back into its dtype's range before softmax.
_CLAMPS = frozenset({"clamp", "clamp_", "clip", "clip_", "masked_fill", "masked_fill_", "nan_to_num", "nan_to_num_"})
_CLAMP_FUNCTIONS = frozenset({"torch.clamp", "torch.clip", "torch.max", "torch.maximum", "torch.where", "torch.nan_to_num"})


@code_check("AMP133", triggers=("finfo",), also=((".min",), ("+",)))
def min_filled_masks_summed(ctx: Context) -> Iterator[CodeHit]:
    # OLMo PR #323: a padding mask `(1 - m) * finfo(dtype).min` added to a causal bias filled with the same min. Where
    # both mask a position the sum is -inf in every float dtype (min + min overflows), and scaled_dot_product_attention
    # or softmax gives NaN for a row with nothing but -inf; the fix clamps the sum back to the dtype's min.
    mins = _MinFills(ctx)
    if not mins.within:
        return
    for node in ctx.src.additions:
        if isinstance(node, ast.BinOp):
            left, right, result = node.left, node.right, _stored_in(ctx, node)
        else:
            left, right, result = node.target, node.value, node.target
        # bindings before the statement the sum is in: one that starts a line above and holds this very sum (``mask = (\n
        # mask + (1 - mask) * finfo.min)``) is what the sum makes, not what it adds
        scope, line = ctx.src.scope(node), _statement(ctx, node).lineno
        fills = [_min_fill(ctx, mins, side, scope, line, 0) for side in (left, right)]
        if None in fills or _clamped(ctx, node, result, scope):
            continue
        where = ", ".join(sorted({f"line {f.lineno}" for f in fills if f is not None}))
        yield node, (f"`{ast.unparse(node)[:60]}` adds two masks each filled with their dtype's minimum ({where}): where both "
                     "mask a position the sum overflows to -inf, and a row of -inf gives NaN in softmax or "
                     "scaled_dot_product_attention; clamp the sum to `torch.finfo(dtype).min`"), Severity.WARNING


def _statement(ctx: Context, node: ast.AST) -> ast.AST:
    """The statement `node` is part of (itself, for an augmented assignment)."""
    return node if isinstance(node, ast.stmt) else next((a for a in ctx.src.ancestors(node) if isinstance(a, ast.stmt)), node)


def _is_finfo_min(ctx: Context, node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "min" and isinstance(node.value, ast.Call) \
        and ctx.qualname(node.value.func) == "torch.finfo"


class _MinFills:
    """One file's `finfo(...).min` values, looked up once: the nodes that hold one (each with it), and the tensors filled
    with one in place, by name and scope."""

    def __init__(self, ctx: Context) -> None:
        self.within: dict[ast.AST, ast.AST] = {}
        for node in ctx.src.attributes:
            if _is_finfo_min(ctx, node):
                self.within.setdefault(node, node)
                for parent in ctx.src.ancestors(node):
                    self.within.setdefault(parent, node)
        self.in_place: dict[tuple[str, ast.AST], list[ast.Call]] = {}
        if not self.within:
            return
        for call, value, target, how in _fill_sites(ctx):
            if how.endswith("_") and target is not None and value is not None and value in self.within:
                name = dotted(target)
                if name is not None:
                    self.in_place.setdefault((name, ctx.src.scope(call)), []).append(call)


def _min_fill(ctx: Context, mins: _MinFills, expr: ast.AST, scope: ast.AST, line: int, depth: int) -> ast.AST | None:
    """Where `expr` was filled with its dtype's min before `line`: written in it (``(1 - m) * finfo(dt).min``), filled
    in place (``bias.masked_fill_(..., finfo(dt).min)``), or so for the name it is a slice, view or cast of."""
    if depth > 3:
        return None
    if expr in mins.within:
        return expr
    base = _sliced_from(expr)
    name = dotted(base) if base is not None else None
    if base is None or name is None:
        return None
    filled = next((call for call in mins.in_place.get((name, scope), ()) if call.lineno < line), None)
    if filled is not None:
        return filled
    before = [(n, v) for n, v in ctx.src.bindings(base, scope) if n < line and v is not None]
    return next((site for n, v in reversed(before) if (site := _min_fill(ctx, mins, v, scope, n, depth + 1)) is not None), None)


def _sliced_from(expr: ast.AST) -> ast.AST | None:
    """The name a value is a slice, view or cast of: ``bias[:, :n].to(dt)`` -> ``bias``."""
    while isinstance(expr, (ast.Subscript, ast.Call)) or (isinstance(expr, ast.Attribute) and dotted(expr) is None):
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        else:
            return None
    return expr


def _stored_in(ctx: Context, node: ast.AST) -> ast.AST | None:
    parent = ctx.src.parents.get(node)
    return parent.targets[0] if isinstance(parent, ast.Assign) and len(parent.targets) == 1 else None


def _clamped(ctx: Context, node: ast.AST, result: ast.AST | None, scope: ast.AST) -> bool:
    """Is the sum brought back into range: inside a clamp, or its name clamped or refilled later in the scope?"""
    for parent in ctx.src.ancestors(node):
        if isinstance(parent, ast.Call) and (ctx.qualname(parent.func) in _CLAMP_FUNCTIONS
                                              or isinstance(parent.func, ast.Attribute) and parent.func.attr in _CLAMPS):
            return True
        if parent is scope:
            break
    name = dotted(result) if result is not None else None
    if name is None:
        return False
    return any(call.lineno > node.lineno and ctx.src.scope(call) is scope and _clamps(ctx, call, name) for call in ctx.src.calls)


def _clamps(ctx: Context, call: ast.Call, name: str) -> bool:
    """Does `call` bring the tensor `name` back into range: a clamp or refill method of it, a clamp function given it,
    or a function of this file that clamps it in place (`_clamps_in_place`)?"""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _CLAMPS and dotted(func.value) == name:
        return True
    if not any(dotted(a) == name for a in call.args):
        return False
    return ctx.qualname(func) in _CLAMP_FUNCTIONS or _clamps_in_place(ctx, call, name)


def _clamps_in_place(ctx: Context, call: ast.Call, name: str) -> bool:
    """`call` hands `name` to a function of this file that clamps or refills that parameter in place
    (``ensure_finite_(bias)`` whose body runs ``x.masked_fill_(x == float("-inf"), torch.finfo(x.dtype).min)``)."""
    if not isinstance(call.func, ast.Name):
        return False
    position = next(i for i, a in enumerate(call.args) if dotted(a) == name)
    for fn in ctx.src.functions:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name != call.func.id:
            continue
        params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        if position >= len(params):
            return False
        param = params[position]
        return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_")
                   and n.func.attr in _CLAMPS and isinstance(n.func.value, ast.Name) and n.func.value.id == param
                   for n in ast.walk(fn))
    return False


@runtime_check("AMP133")
def fill_became_inf(ctx: RuntimeContext) -> Iterator[Hit]:
    """A finite constant that came out infinite in a half tensor: a Python number (``torch.where(mask, -1e9, scores)``)
    or an fp32 mask filled with float32's min, with a fully masked row, cast to half. A warning: the step runs on, and
    only fully masked rows turn NaN (the crash of masked_fill is the error the catalog names)."""
    t = ctx.trace
    # A cast whose result is then filled with a finite number, in place or into the copy the code goes on with, so
    # that no row is left all infinite (`bias.masked_fill_(bias == -inf, finfo(bias.dtype).min)`, the fix this rule
    # asks for), does not pass its infinities on.
    refilled = {op.producers[0] for op in t.tagged(Tag.REFILL) if op.producers}
    for op in t.tagged(Tag.FILL):
        if op.seq in refilled:
            continue
        value, dtype, how = op.extra[1], op.extra[2], op.extra[3]
        what = "is written into" if how == "fill" else "is cast, in a float32 tensor, to"
        yield Hit(f"the constant {value:g} {what} {name_of(dtype)}, where it becomes {'-' if value < 0 else ''}inf "
                  "(a fully masked row then gives NaN in softmax)", t.location(op.seq), severity=Severity.WARNING)
        return
