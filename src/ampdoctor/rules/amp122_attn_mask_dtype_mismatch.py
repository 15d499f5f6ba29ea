"""AMP122 attn-mask-dtype-mismatch: An attention mask's dtype matches neither bool nor the query dtype.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP122`)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.dtypes import name_of
from ampdoctor.lint.python.context import MATMUL_CALLS, CodeHit, Context, calls_named, construction_only
from ampdoctor.lint.python.dataflow import BF16, FP16, FP32, FP64, HALF, TORCH_DTYPES, describe, torch_factory
from ampdoctor.lint.python.fp32 import (
    HALF_WEIGHT_WORDS,
    autocast_elsewhere,
    device_move,
    fp32_made,
    half_weights,
    last_value,
    local_callee,
    made_in,
    under_autocast,
)
from ampdoctor.lint.python.resolve import argument, keyword, last_identifier, method, tokens
from ampdoctor.lint.python.source import parameters

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


@runtime_check("AMP122")
def mask_of_another_dtype(ctx: RuntimeContext) -> Iterator[Hit]:
    """Judged at the call, with the dtypes the caller gave it: which aten ops the call becomes is the kernel's choice
    (CPU's math path, taken with dropout, casts q/k/v and the mask to fp32 itself, and the mismatch is then nowhere in
    its ops). Under autocast there is no mismatch: autocast casts the mask with q/k/v to its dtype."""
    t = ctx.trace
    for call in t.attention_calls:
        if call.start == call.end or call.autocast is not None or call.mask is None or not call.mask.is_floating_point or call.mask == call.query:
            continue
        yield Hit(f"F.scaled_dot_product_attention gets a {name_of(call.mask)} attention mask for {name_of(call.query)} queries",
                  replace(t.location(call.start), op="F.scaled_dot_product_attention"))
        return


# --- code: the static view --------------------------------------------------------------------------------------

_SDPA = frozenset({"torch.nn.functional.scaled_dot_product_attention"})
FLOATS = FP32 | HALF | FP64


@code_check("AMP122", triggers=("scaled_dot_product_attention",), also=(("float", "zeros", "ones", "empty", "full", "tensor", "from_numpy"),
                                                                       HALF_WEIGHT_WORDS), project=True)
def fp32_mask_into_half_attention(ctx: Context) -> Iterator[CodeHit]:
    """Inside a model whose weights are half (the file or the project casts it, or the class casts its other inputs
    to its weights' dtype), outside autocast, ``F.scaled_dot_product_attention`` gets an attention mask the code made
    fp32 (``mask.float()``, a ``torch.zeros(...)`` without dtype filled with -inf) beside queries the code leaves in
    the model's dtype: SDPA takes a float mask only in the query's dtype and refuses the pair. Under autocast the mask
    is cast with q/k/v, so a file or project that autocasts is left alone (AMP131's gates, shared)."""
    if autocast_elsewhere(ctx):
        return
    for call, _ in calls_named(ctx, _SDPA):
        mask = argument(call, 3, "attn_mask")
        query = argument(call, 0, "query")
        cls = ctx.src.enclosing_class(call)
        if mask is None or query is None or cls is None:
            continue
        scope = ctx.src.scope(call)
        made = fp32_made(ctx, mask, scope)
        if made is None or fp32_made(ctx, query, scope) is not None or under_autocast(ctx, call) or ctx.facts.expects_error(call):
            continue
        why = half_weights(ctx, cls)
        if why is None:
            continue
        yield call, (f"the attention mask `{ast.unparse(mask)[:40]}` is {made_in(made)} (line {made.lineno}) while the "
                     f"queries follow the model's half weights ({why[0]}) and no autocast runs the call: SDPA takes a float "
                     f"mask only in the query's dtype and refuses this one; make it bool, or cast it with "
                     f"`.to({ast.unparse(query)[:20]}.dtype)` before the call"), Severity.WARNING


# An additive mask made in a dtype the code fixes, whatever the model runs in (huggingface/transformers #18803, Swin's
# shifted-window mask made by `torch.zeros` without dtype; a helper's `dtype=torch.float16` default that its call leaves).

# Methods whose result keeps the dtype of the tensor they are called on.
_KEEPS = frozenset({"unsqueeze", "squeeze", "view", "reshape", "contiguous", "clone", "detach", "cpu", "cuda", "transpose",
                    "permute", "flatten", "unflatten", "expand", "expand_as", "repeat", "repeat_interleave", "narrow",
                    "masked_fill", "masked_fill_", "triu", "tril", "to", "neg", "abs", "roll", "flip"})
_FILLS = frozenset({"masked_fill", "masked_fill_"})
_HALF_CASTS = {"float": FP32, "half": FP16, "bfloat16": BF16, "double": FP64}
# Factories that make floats in the default dtype when given no dtype (`torch.full` unless its value is an int or bool).
_DEFAULT_FLOAT = frozenset({"zeros", "ones", "empty", "rand", "randn", "full"})
# A keyword a mask is handed over by: one of its words says mask (``attention_mask=``, ``attn_mask=``, ``src_mask=``).
_MASK_WORD = "mask"
_INFINITIES = frozenset({"math.inf", "torch.inf", "numpy.inf"})
DtypeFix = tuple[frozenset, str, "ast.AST | None"]


@dataclass(frozen=True)
class _Made:
    """What the tracer knows of a mask: the dtypes it is surely made in, where that was fixed and how, and whether a
    large negative number (or -inf, a dtype's min) was written into it, which makes it an additive mask."""

    dtypes: frozenset
    origin: ast.AST
    how: str
    additive: bool = False


@dataclass(frozen=True)
class _Frame:
    """A function being traced for one call of it: its parameters bound to what that call passes (the caller's
    expressions, read in the caller's frame), so that a mask or dtype given by the caller is followed there."""

    fn: ast.AST
    call: ast.Call | None = None
    caller: "_Frame | None" = None

    def _parameters(self) -> list[tuple[ast.arg, ast.expr | None]]:
        fn = self.fn
        return parameters(fn.args) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else []

    def passed(self, name: str) -> tuple[bool, ast.expr | None]:
        """(is a parameter of this frame's function, what the call passes for it: None where it leaves the default)."""
        params = self._parameters()
        index = next((i for i, (a, _) in enumerate(params) if a.arg == name), None)
        if index is None:
            return False, None
        if self.call is None:
            return True, None
        value = keyword(self.call, name)
        bound = isinstance(self.call.func, ast.Attribute) and params[0][0].arg in ("self", "cls")
        position = index - (1 if bound else 0)
        args = self.call.args
        if value is None and 0 <= position < len(args) and not any(isinstance(a, ast.Starred) for a in args[:position + 1]):
            value = args[position]
        return True, value

    def default(self, name: str) -> ast.expr | None:
        return next((d for a, d in self._parameters() if a.arg == name), None)

    def calling(self, ctx: Context) -> "_Frame":
        """The frame of the code that made this frame's call."""
        assert self.call is not None
        return self.caller or _Frame(ctx.src.scope(self.call))

    def hops(self) -> int:
        frame, n = self, 0
        while frame.caller is not None:
            frame, n = frame.caller, n + 1
        return n


def _literal_dtype(ctx: Context, expr: ast.AST | None, frame: _Frame, line: int, depth: int = 0) -> DtypeFix | None:
    """The one float dtype `expr` surely names, how, and the call that chose it where a caller did: a literal
    (``torch.float16``), a local name bound to one, or a parameter the traced call leaves at such a default (that
    call) or passes such a literal for. None for anything that may follow the model (``x.dtype``, ``self.dtype``, an
    argument the file does not show)."""
    if depth > 6 or not isinstance(expr, (ast.Name, ast.Attribute)):
        return None
    found = TORCH_DTYPES.get(ctx.qualname(expr) or "")
    if found or isinstance(expr, ast.Attribute):
        return (found, f"`{ast.unparse(expr)}`", None) if found and found <= FLOATS else None
    is_param, passed = frame.passed(expr.id)
    rebound = [b for b in ctx.src.bindings(expr, frame.fn) if b[0] != getattr(frame.fn, "lineno", -1)]
    if is_param and not rebound:
        return _parameter_dtype(ctx, expr, frame, passed, depth)
    before = [v for n, v in rebound if n < line and v is not None]
    if len(rebound) != 1 or not before:
        return None
    return _literal_dtype(ctx, before[-1], frame, rebound[0][0], depth + 1)


def _parameter_dtype(ctx: Context, param: ast.Name, frame: _Frame, passed: ast.expr | None, depth: int) -> DtypeFix | None:
    """`_literal_dtype` of a parameter of the traced function: what its call passes, or the default it leaves. A
    parameter of the function where the mask is handed over (no call traced) is what its unseen callers give."""
    if frame.call is None:
        return None
    if passed is not None:
        given = _literal_dtype(ctx, passed, frame.calling(ctx), frame.call.lineno, depth + 1)
        return (given[0], given[1], given[2] or frame.call) if given is not None else None
    default = frame.default(param.id)
    inner = _literal_dtype(ctx, default, _Frame(ctx.src.scope(frame.fn)), getattr(frame.fn, "lineno", 0), depth + 1)
    if inner is None or default is None:
        return None
    name = getattr(frame.fn, "name", "?")
    return inner[0], f"the default `{param.id}={ast.unparse(default)}` of `{name}`, which this call leaves", frame.call


def _negative_fill(ctx: Context, expr: ast.AST | None, depth: int = 0) -> bool:
    """A large negative number that masks a position out: a literal of -100 or below, ``float("-inf")``, ``-math.inf``,
    ``-float("inf")``, ``torch.finfo(...).min``, or a name bound once to one (``NEG_INF = -1e9``)."""
    if expr is None or depth > 3:
        return False
    if isinstance(expr, ast.Name):
        bound = ctx.src.bindings(expr, ctx.src.scope(expr))
        return len(bound) == 1 and bound[0][1] is not None and _negative_fill(ctx, bound[0][1], depth + 1)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        return _large(ctx, expr.operand)
    if _float_of(expr) is not None:
        text = _float_of(expr)
        return text in ("-inf", "-infinity") if isinstance(text, str) else _negative_fill(ctx, text, depth + 1)
    if isinstance(expr, ast.Constant):
        return _number(expr) is not None and expr.value <= -100
    return _is_finfo(ctx, expr, "min")


def _large(ctx: Context, expr: ast.AST) -> bool:
    """A positive number that negated masks a position out: 100 or more, ``inf`` (`math`, `torch`, ``float("inf")``)."""
    if isinstance(expr, ast.Constant):
        return _number(expr) is not None and expr.value >= 100
    text = _float_of(expr)
    return text in ("inf", "infinity") or (ctx.qualname(expr) or "") in _INFINITIES


def _float_of(expr: ast.AST) -> str | ast.AST | None:
    """What ``float(...)`` is given: its string, lowered and stripped (``float("-inf")``), or its argument; None where
    `expr` is no such call."""
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "float" and len(expr.args) == 1):
        return None
    arg = expr.args[0]
    return arg.value.strip().lower() if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else arg


def _number(expr: ast.Constant) -> float | None:
    value = expr.value
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _is_finfo(ctx: Context, expr: ast.AST, *bounds: str) -> bool:
    """``torch.finfo(...).min`` (or another of `bounds`)."""
    return isinstance(expr, ast.Attribute) and expr.attr in bounds and isinstance(expr.value, ast.Call) \
        and ctx.qualname(expr.value.func) == "torch.finfo"


def _scalar(ctx: Context, expr: ast.AST, depth: int = 0) -> bool:
    """A Python number (or a dtype bound, ``torch.finfo(dt).min``), which arithmetic with a tensor leaves in the tensor's
    dtype: a literal, ``float(...)``, a `math` function, a size read off a shape (``q.shape[-1] ** -0.5``), arithmetic of
    those."""
    if depth > 4:
        return False
    if isinstance(expr, ast.UnaryOp):
        expr = expr.operand
    if isinstance(expr, ast.Constant):
        return _number(expr) is not None
    if isinstance(expr, ast.BinOp):
        return _scalar(ctx, expr.left, depth + 1) and _scalar(ctx, expr.right, depth + 1)
    if isinstance(expr, ast.Subscript):
        return isinstance(expr.value, ast.Attribute) and expr.value.attr == "shape"
    if isinstance(expr, ast.Call):
        return isinstance(expr.func, ast.Name) and expr.func.id in ("float", "int", "len") or (ctx.qualname(expr.func) or "").startswith("math.")
    return _is_finfo(ctx, expr, "min", "max") or (ctx.qualname(expr) or "").startswith("math.")


def _traced(ctx: Context, expr: ast.AST | None, frame: _Frame, line: int, depth: int = 0) -> _Made | None:
    """Where `expr`, a tensor read at `line` in `frame`, was surely made in one fixed float dtype (`_Made`), through the
    names it was bound to, views, moves to a device, fills, arithmetic with numbers and the returns of the file's own
    functions it comes from; None where its dtype may follow anything else (an argument, a buffer, a tensor's dtype)."""
    if expr is None or depth >= 40 or frame.hops() > 3:
        return None
    if isinstance(expr, ast.Name):
        return _traced_name(ctx, expr, frame, line, depth)
    if isinstance(expr, ast.Subscript):
        return _traced(ctx, expr.value, frame, line, depth + 1)
    if isinstance(expr, ast.Attribute):
        return _traced_attribute(ctx, expr, depth)
    if isinstance(expr, ast.BinOp) and not isinstance(expr.op, ast.MatMult):
        return _traced_arithmetic(ctx, expr, frame, line, depth)
    if not isinstance(expr, ast.Call):
        return None
    name = ctx.qualname(expr.func)
    if name in ("torch.triu", "torch.tril") and expr.args:
        return _traced(ctx, expr.args[0], frame, line, depth + 1)
    if name is not None and name.startswith("torch."):
        return _traced_factory(ctx, expr, name, frame, line)
    if isinstance(expr.func, ast.Attribute) and name is None and (expr.func.attr in _KEEPS or expr.func.attr in _HALF_CASTS
                                                                  or expr.func.attr == "type"):
        return _traced_method(ctx, expr, expr.func, frame, line, depth)
    return _traced_callee(ctx, expr, frame, depth)


def _traced_attribute(ctx: Context, expr: ast.Attribute, depth: int) -> _Made | None:
    """``self.causal_mask``: a plain attribute that the class's ``__init__`` binds once, read where it was made there.
    Not a buffer: a cast of the module casts its buffers (and parameters) with it, never its plain tensor attributes,
    which keep the dtype they were made in whatever the model is cast to."""
    cls = ctx.src.enclosing_class(expr)
    init = method(cls, "__init__") if cls is not None and isinstance(expr.value, ast.Name) and expr.value.id == "self" else None
    if init is None or _registered(ctx, cls, expr.attr):
        return None
    bound = [(line, v) for line, v in ctx.src.bindings(expr, ctx.src.scope(expr)) if ctx.src.enclosing_class(v or expr) is cls]
    if len(bound) != 1 or bound[0][1] is None or ctx.src.enclosing_function(bound[0][1]) is not init:
        return None
    return _traced(ctx, bound[0][1], _Frame(init), bound[0][0], depth + 1)


def _registered(ctx: Context, cls: ast.ClassDef, attr: str) -> bool:
    """The class registers `attr` as a buffer or parameter (``self.register_buffer("mask", ...)``), which a cast of the
    module casts."""
    return any(isinstance(c.func, ast.Attribute) and c.func.attr in ("register_buffer", "register_parameter") and c.args
               and isinstance(c.args[0], ast.Constant) and c.args[0].value == attr and ctx.src.enclosing_class(c) is cls
               for c in ctx.src.calls)


def _traced_name(ctx: Context, expr: ast.Name, frame: _Frame, line: int, depth: int) -> _Made | None:
    """A name: the value it was last bound to before `line` in its function, or what the traced call passes for it."""
    is_param, passed = frame.passed(expr.id)
    own = [b for b in ctx.src.bindings(expr, frame.fn) if b[0] < line and b[0] != getattr(frame.fn, "lineno", -1)]
    if not own:
        if is_param and passed is not None and frame.call is not None:
            return _traced(ctx, passed, frame.calling(ctx), frame.call.lineno, depth + 1)
        return None
    # a name set to None on one branch (``else: mask = None``) is the mask on the other
    values = [b for b in own if not (isinstance(b[1], ast.Constant) and b[1].value is None)]
    if not values or values[-1][1] is None:
        return None
    at, value = values[-1]
    return _traced(ctx, value, frame, at, depth + 1)


def _traced_arithmetic(ctx: Context, expr: ast.BinOp, frame: _Frame, line: int, depth: int) -> _Made | None:
    """Arithmetic with a number keeps the tensor's dtype (times a large negative one makes it additive,
    ``(1.0 - keep) * -10000.0``); between two tensors made in one dtype, that dtype."""
    for tensor, number in ((expr.left, expr.right), (expr.right, expr.left)):
        if _scalar(ctx, number) and not _scalar(ctx, tensor):
            made = _traced(ctx, tensor, frame, line, depth + 1)
            if made is None:
                return None
            negative = isinstance(expr.op, ast.Mult) and _negative_fill(ctx, number)
            return replace(made, additive=made.additive or negative)
    left, right = _traced(ctx, expr.left, frame, line, depth + 1), _traced(ctx, expr.right, frame, line, depth + 1)
    if left is not None and right is not None and left.dtypes == right.dtypes:
        return replace(left, additive=left.additive or right.additive)
    return None


def _traced_factory(ctx: Context, expr: ast.Call, name: str, frame: _Frame, line: int) -> _Made | None:
    """A torch factory: in the default float32 without a dtype (`_DEFAULT_FLOAT`), or in the literal dtype it is given;
    ``torch.full`` with a large negative value makes an additive mask."""
    made = torch_factory(name)
    if made is None or made.endswith("_like"):
        return None
    given = keyword(expr, "dtype")
    value = expr.args[1] if made == "full" and len(expr.args) > 1 else None
    negative = _negative_fill(ctx, value)
    if given is None:
        integral = isinstance(value, ast.Constant) and isinstance(value.value, (bool, int))
        return _Made(FP32, expr, f"`torch.{made}` without a dtype (the default float32)", negative) \
            if made in _DEFAULT_FLOAT and not integral else None
    fixed = _literal_dtype(ctx, given, frame, line)
    return _Made(fixed[0], fixed[2] or expr, f"`torch.{made}(..., dtype={ast.unparse(given)[:30]})` (line {expr.lineno}), {fixed[1]}",
                 negative) if fixed else None


def _traced_method(ctx: Context, expr: ast.Call, func: ast.Attribute, frame: _Frame, line: int, depth: int) -> _Made | None:
    """A tensor method: ``.float()`` and the other casts fix their dtype, ``.to(dtype)`` the literal it is given; a view,
    a move or a fill keeps the dtype of the tensor it is called on (a fill with a large negative value makes it
    additive)."""
    if func.attr in _HALF_CASTS and not expr.args and not expr.keywords:
        return _Made(_HALF_CASTS[func.attr], expr, f"`.{func.attr}()`")
    if func.attr in ("to", "type") and (keyword(expr, "dtype") is not None or expr.args and not device_move(expr)):
        given = keyword(expr, "dtype")
        if given is None:
            given = next((a for a in expr.args[:2] if _literal_dtype(ctx, a, frame, line) is not None), expr.args[0] if expr.args else None)
        fixed = _literal_dtype(ctx, given, frame, line)
        if fixed is None:
            return None
        inner = _traced(ctx, func.value, frame, line, depth + 1)
        return _Made(fixed[0], fixed[2] or expr, f"`.{func.attr}({ast.unparse(given)[:30]})` (line {expr.lineno}), {fixed[1]}",
                     inner is not None and inner.additive)
    if func.attr not in _KEEPS:
        return None
    made = _traced(ctx, func.value, frame, line, depth + 1)
    if made is None:
        return None
    negative = func.attr in _FILLS and _negative_fill(ctx, argument(expr, 1, "value"))
    return replace(made, additive=made.additive or negative)


def _traced_callee(ctx: Context, expr: ast.Call, frame: _Frame, depth: int) -> _Made | None:
    """A call of the file's own function: what every return of it that is not None makes, for this call's arguments."""
    # not a module's forward (``self.attention(...)`` hands the mask over, it does not make it)
    callee = local_callee(ctx, expr, modules=False)
    if callee is None:
        return None
    inner = _Frame(callee, expr, frame)
    returns = [r.value for r in ctx.src.own_returns(callee)
               if r.value is not None and not (isinstance(r.value, ast.Constant) and r.value.value is None)]
    made = [_traced(ctx, r, inner, r.lineno, depth + 1) for r in returns]
    if not made or any(m is None for m in made) or len({m.dtypes for m in made}) != 1:
        return None
    return replace(made[0], additive=any(m.additive for m in made))


def _handed_masks(ctx: Context, call: ast.Call) -> Iterator[ast.expr]:
    """The masks a call hands to attention: SDPA's `attn_mask`; for a call of anything but a torch function (a module,
    a method), an argument by a keyword that says mask (``attention_mask=m``), or a name that says an attention mask
    given by position (``self.attention(x, attn_mask)``)."""
    name = ctx.qualname(call.func)
    if name in _SDPA:
        mask = argument(call, 3, "attn_mask")
        if mask is not None:
            yield mask
        return
    if name is not None and name.split(".")[0] in ("torch", "math", "numpy"):
        return
    if isinstance(call.func, ast.Attribute) and call.func.attr in _KEEPS | {"where", "append", "extend", "register_buffer"}:
        return  # a buffer registered is cast with the model's weights
    for kw in call.keywords:
        if kw.arg is not None and _MASK_WORD in tokens(kw.arg):
            yield kw.value
    for arg in call.args:
        words = tokens(last_identifier(arg) or "") if isinstance(arg, (ast.Name, ast.Attribute)) else frozenset()
        if _MASK_WORD in words and words & {"attn", "attention", "bias"}:
            yield arg


def _may_hand_a_mask(call: ast.Call) -> bool:
    """What `_handed_masks` needs of a call, on its text alone (most calls of a model file fail it): a keyword or a
    name handed over that says mask, or a fourth positional argument (SDPA's `attn_mask`)."""
    args = call.args
    if len(args) > 3:
        return True
    for kw in call.keywords:
        if kw.arg is not None and _MASK_WORD in kw.arg.lower():
            return True
    for arg in args:
        kind = arg.__class__
        if kind is ast.Name and _MASK_WORD in arg.id.lower() or kind is ast.Attribute and _MASK_WORD in arg.attr.lower():
            return True
    return False


def _product(ctx: Context, expr: ast.Call) -> bool:
    """A matrix product call: ``torch.matmul``, ``torch.bmm``, ``einsum``, ``baddbmm``, or ``q.matmul(k)``."""
    func = expr.func
    return ctx.qualname(func) in MATMUL_CALLS or isinstance(func, ast.Attribute) and ctx.qualname(func) is None and func.attr in ("matmul", "bmm")


def _scores(ctx: Context, expr: ast.AST, frame: _Frame, line: int, depth: int = 0) -> bool:
    """Attention scores: a matrix product (``q @ k.transpose(-2, -1)``, ``torch.matmul``, ``einsum``, ``bmm``), scaled by
    a number or not, directly or as the value its name was last bound to before `line`."""
    if depth > 4:
        return False
    if isinstance(expr, ast.BinOp):
        if isinstance(expr.op, ast.MatMult):
            return True
        return isinstance(expr.op, (ast.Mult, ast.Div)) and any(
            _scores(ctx, a, frame, line, depth + 1) and _scalar(ctx, b) for a, b in ((expr.left, expr.right), (expr.right, expr.left)))
    if isinstance(expr, ast.Call):
        func = expr.func
        return _product(ctx, expr) or isinstance(func, ast.Attribute) and ctx.qualname(func) is None and func.attr in ("view", "reshape") \
            and _scores(ctx, func.value, frame, line, depth + 1)
    if isinstance(expr, ast.Name):
        before = [(n, v) for n, v in ctx.src.bindings(expr, frame.fn) if n < line and v is not None]
        return bool(before) and _scores(ctx, before[-1][1], frame, before[-1][0], depth + 1)
    return False


def _fp32_scores(ctx: Context, expr: ast.AST, scope: ast.AST, depth: int = 0) -> bool:
    """Scores of a product whose two operands the code made fp32 (``q.float() @ k.float().transpose(-2, -1)``): with no
    autocast around them they are fp32, and an fp32 mask matches them."""
    if depth > 4:
        return False
    if isinstance(expr, ast.Name):
        value = last_value(ctx, expr, scope)
        return value is not None and _fp32_scores(ctx, value, scope, depth + 1)
    if isinstance(expr, ast.BinOp):
        if isinstance(expr.op, ast.MatMult):
            return fp32_made(ctx, expr.left, scope) is not None and fp32_made(ctx, expr.right, scope) is not None
        return _fp32_scores(ctx, expr.left, scope, depth + 1) or _fp32_scores(ctx, expr.right, scope, depth + 1)
    if isinstance(expr, ast.Call) and ctx.qualname(expr.func) in MATMUL_CALLS:
        operands = [a for a in expr.args if not isinstance(a, ast.Constant)]
        return bool(operands) and all(fp32_made(ctx, a, scope) is not None for a in operands)
    return False


def _cast_back(ctx: Context, node: ast.AST, fn: ast.AST) -> bool:
    """The promoted sum is cast back to a tensor's dtype before it meets the values (``softmax(scores + mask,
    -1).type_as(v)``, ``.to(q.dtype)``): the code means the fp32 scores, and nothing fails."""
    parent = ctx.src.parents.get(node)
    stored = node.target if isinstance(node, ast.AugAssign) else parent.targets[0] if isinstance(parent, ast.Assign) else None
    name = stored.id if isinstance(stored, ast.Name) else None
    for call in ctx.src.calls_in(fn):
        func = call.func
        if call.lineno < node.lineno or not isinstance(func, ast.Attribute) or func.attr not in ("type_as", "to"):
            continue
        if func.attr == "to" and not any(isinstance(a, ast.Attribute) and a.attr == "dtype" for a in [*call.args, *(k.value for k in call.keywords)]):
            continue
        if any(n is node or name is not None and isinstance(n, ast.Name) and n.id == name for n in ast.walk(func.value)):
            return True
    return False


def _added_masks(ctx: Context) -> Iterator[tuple[ast.AST, ast.expr]]:
    """(the sum, the mask) where a hand-written attention adds a mask to its scores (``scores + mask``,
    ``attn += bias[None]``) and does not cast the promoted sum back (`_cast_back`)."""
    holding = _holding_products(ctx)
    for node in ctx.src.additions if holding else ():
        left, right = (node.left, node.right) if isinstance(node, ast.BinOp) else (node.target, node.value)
        fn = ctx.src.enclosing_function(node)
        if fn is None or fn not in holding:
            continue
        # the scores first: most additions are none, and the cast-back test reads every call of the function
        mask = next((m for s, m in ((left, right), (right, left)) if _scores(ctx, s, _Frame(fn), node.lineno)), None)
        if mask is not None and not _cast_back(ctx, node, fn):
            yield node, mask


# The last names of the product calls `_product` knows: a call named otherwise is none of them.
_PRODUCT_NAMES = frozenset({n.rsplit(".", 1)[1] for n in MATMUL_CALLS} | {"matmul", "bmm"})


def _holding_products(ctx: Context) -> set[ast.AST]:
    """The functions a matrix product lies in (in their own body or a nested one's). `_scores` follows names only
    through the bindings of the sum's own function, which hold no product from elsewhere (a parameter resolves to a
    literal at most): a sum in any other function adds no scores, and most functions of a model file hold none."""
    products = [*ctx.src.matmuls, *(c for c in ctx.src.calls if isinstance(c.func, ast.Name)
                                    or isinstance(c.func, ast.Attribute) and c.func.attr in _PRODUCT_NAMES)]
    holding: set[ast.AST] = set()
    for node in products:
        if isinstance(node, ast.Call) and not _product(ctx, node):
            continue
        for outer in ctx.src.ancestors(node):
            if outer in holding:
                break  # and every function around it
            if isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
                holding.add(outer)
    return holding


def _fixed_mask(ctx: Context, site: ast.AST, mask: ast.expr) -> tuple[_Made, tuple[str, int] | None] | None:
    """The additive mask `site` hands over or adds, where the code fixes its float dtype, and why the model's weights are
    half (for an fp32 mask); None where it is no such mask, where its function only builds the module (a mask made in
    ``__init__`` is kept as a buffer, which the model's cast casts), under autocast, or beside fp32 hidden states or
    scores. An fp32 mask SDPA gets in a half model is `fp32_mask_into_half_attention`'s."""
    cls = ctx.src.enclosing_class(site)
    fn = ctx.src.enclosing_function(site)
    if cls is None or fn is None:
        return None
    # the trace first: most masks handed on are no additive mask of a fixed dtype, and the autocast and construction
    # tests walk the file
    made = _traced(ctx, mask, _Frame(fn), site.lineno)
    if made is None or not made.additive or not made.dtypes <= FLOATS or under_autocast(ctx, site) or construction_only(ctx, fn):
        return None
    scope = ctx.src.scope(site)
    if made.dtypes == FP32 and _fp32_beside(ctx, site, mask, scope):
        return None
    why = half_weights(ctx, cls) if made.dtypes == FP32 else None
    if why is not None and isinstance(site, ast.Call) and ctx.qualname(site.func) in _SDPA and fp32_made(ctx, mask, scope) is not None:
        return None
    return made, why


def _fp32_beside(ctx: Context, site: ast.AST, mask: ast.expr, scope: ast.AST) -> bool:
    """The hidden states handed over beside the mask, or the scores it is added to, are fp32 too."""
    called = isinstance(site, ast.Call)
    beside = site.args if called else [site.left, site.right] if isinstance(site, ast.BinOp) else [site.target, site.value]
    return any(fp32_made(ctx, a, scope) is not None or not called and _fp32_scores(ctx, a, scope) for a in beside if a is not mask)


@code_check("AMP122", triggers=("mask",), also=(("zeros", "ones", "full", "empty", "float()", "float16", "bfloat16", "half()",
                                                   "float32"),), project=True)
def mask_made_in_a_fixed_dtype(ctx: Context) -> Iterator[CodeHit]:
    """An additive attention mask (a large negative number, -inf or a dtype's min written into it) made in a dtype the
    code fixes (``torch.zeros(...)`` without dtype, ``.float()``, a ``dtype=torch.float16`` default its call leaves),
    handed to attention or added to its scores in a model's code with no autocast in the file or its project. It
    matches the queries only in that one dtype: a model run in another (cast to half for inference, or left fp32 beside
    an fp16 mask) meets a float mask of another dtype, which SDPA refuses, and a hand-written attention adds it to its
    scores, promotes them and fails at the product with the values ("expected scalar type Half but found Float").
    Reported where the dtype is fixed: the factory or cast that writes it, or the call that leaves a helper's dtype
    default. A note: nothing here says the model runs in another dtype; a warning where the file or project casts the
    model to half beside an fp32 mask."""
    if autocast_elsewhere(ctx):
        return
    seen: set[int] = set()
    handed = [(call, mask) for call in ctx.src.calls if _may_hand_a_mask(call) for mask in _handed_masks(ctx, call)]
    for site, mask in [*handed, *_added_masks(ctx)]:
        found = _fixed_mask(ctx, site, mask)
        if found is None or id(found[0].origin) in seen:
            continue
        made, why = found
        seen.add(id(made.origin))
        other = "half (fp16 or bf16)" if made.dtypes == FP32 else "fp32 or another half dtype"
        context = f"; {why[0]}" if why is not None else ""
        used = "handed to attention" if isinstance(site, ast.Call) else "added to attention scores"
        yield made.origin, (f"an additive attention mask is made in {describe(made.dtypes)} here, fixed by {made.how}, whatever "
                            f"dtype the model runs in, and {used} as `{ast.unparse(mask)[:40]}` (line {site.lineno}){context}: a "
                            f"model run in {other} without autocast meets a float mask of another dtype than its queries, which "
                            f"SDPA refuses and a hand-written attention promotes its scores by (\"expected scalar type ... but found "
                            f"Float\" at the product with the values); make the mask in the hidden states' dtype (`dtype=x.dtype`) "
                            f"or cast it before attention"), Severity.WARNING if why is not None else Severity.INFO
