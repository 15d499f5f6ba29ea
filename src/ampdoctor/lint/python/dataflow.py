"""A small dataflow layer: which floating dtypes an expression may denote.

Two questions, both answered with a set of dtype tags (``bf16``, ``fp16``, ``fp32``, ``fp64``) or None when
the code does not say:

* `dtype_of(expr)`: the dtype *object* an expression names: ``torch.bfloat16``, ``DTYPE`` after
  ``DTYPE = torch.bfloat16``, ``torch.bfloat16 if args.bf16 else torch.float16`` (``{bf16, fp16}``: maybe bf16),
  ``{"bf16": torch.bfloat16}[name]``, ``getattr(torch, "bfloat16")``, the strings ``"bf16"``/``"float16"``.
  Names resolve flow-insensitively: the union over every assignment in the scope.
* `tensor_dtype(expr)`: the dtype of a *tensor* expression: casts (``.bfloat16()``, ``.to(dtype)``,
  ``.type_as(y)``), factories with ``dtype=``, dtype-preserving methods (``.cos()``, ``.view()``), and names
  through their last assignment before the use (so ``logits = logits.float()`` makes later uses fp32).

`fp16_polarity(expr)` says whether a condition being true implies fp16 (+1: ``dtype == torch.float16``,
``args.fp16``), implies bf16 (-1: ``args.bf16``, ``dtype != torch.float16``), or neither (0): the basis of the
"is this GradScaler gated on fp16?" question.
"""

from __future__ import annotations

import ast
import functools
import re
from typing import Optional

from ampdoctor import dtypes
from ampdoctor.lint.python.resolve import argument, keyword, tokens
from ampdoctor.lint.python.source import SourceFile

DTypes = Optional[frozenset]
HALF = dtypes.HALF
BF16, FP16, FP32, FP64 = (frozenset({n}) for n in (dtypes.BF16, dtypes.FP16, dtypes.FP32, dtypes.FP64))

TORCH_DTYPES = {
    "torch.bfloat16": BF16, "torch.float16": FP16, "torch.half": FP16,
    "torch.float32": FP32, "torch.float": FP32, "torch.float64": FP64, "torch.double": FP64,
}
# Strings that name a dtype or a precision mode (`mixed_precision="bf16"`, `precision="bf16-mixed"`, `torch_dtype="bfloat16"`).
STRING_DTYPES = {
    **{alias: frozenset({name}) for alias, name in dtypes.ALIASES.items()},
    **{f"torch.{alias}": frozenset({name}) for alias, name in dtypes.ALIASES.items()},
    **{mode: frozenset({name}) for mode, name in dtypes.PRECISION_MODES.items()},
}
CAST_METHODS = {"bfloat16": BF16, "half": FP16, "float": FP32, "double": FP64}
# Methods and torch functions whose result has the dtype of their (first) tensor operand.
_INT_DTYPE = re.compile(r"^torch\.u?int(8|16|32|64)$|^torch\.(short|int|long|bool)$")
PRESERVING = frozenset({
    "cos", "sin", "exp", "neg", "abs", "sqrt", "rsqrt", "unsqueeze", "squeeze", "view", "reshape", "contiguous",
    "clone", "detach", "cpu", "cuda", "transpose", "permute", "flatten", "unflatten", "expand", "expand_as", "repeat",
    "repeat_interleave", "narrow", "t", "mul", "add", "sub", "div", "pow", "mean", "sum", "softmax", "log_softmax",
    "requires_grad_", "pin_memory", "roll", "flip", "masked_fill", "clamp", "outer", "sigmoid", "tanh",
})
FACTORIES = frozenset({
    "arange", "linspace", "logspace", "zeros", "ones", "empty", "full", "tensor", "as_tensor", "rand", "randn",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "range", "eye",
})
MAX_DEPTH = 8


def torch_factory(name: str | None) -> str | None:
    """The factory (`FACTORIES`) a qualified name calls, ``torch.zeros`` -> "zeros"; None for anything else."""
    short = name.rsplit(".", 1)[-1] if name and name.startswith("torch.") else None
    return short if short in FACTORIES else None


def union(parts: list[DTypes]) -> DTypes:
    known = [p for p in parts if p is not None]
    if not known:
        return None
    return frozenset().union(*known)


def describe(names: frozenset) -> str:
    return dtypes.describe(names)


class Dataflow:
    def __init__(self, src: SourceFile) -> None:
        self.src = src
        self.half_models: dict[str, tuple[frozenset, int]] = {}
        self._rebound: dict[ast.AST, frozenset[str]] = {}  # by scope: `_rebound_in`

    # --- dtype objects ---------------------------------------------------------------------------

    def dtype_of(self, expr: ast.AST | None, scope: ast.AST | None = None, depth: int = 0) -> DTypes:
        if expr is None or depth > MAX_DEPTH:
            return None
        if isinstance(expr, ast.Constant):
            if expr.value is None:
                return frozenset()
            return STRING_DTYPES.get(expr.value.lower()) if isinstance(expr.value, str) else None
        if isinstance(expr, (ast.Name, ast.Attribute)):
            found = TORCH_DTYPES.get(self.src.imports.qualname(expr) or "")
            if found is not None:
                return found
            return self._through_bindings(expr, scope, depth, self.dtype_of, flow_sensitive=False)
        if isinstance(expr, ast.IfExp):
            return union([self.dtype_of(expr.body, scope, depth + 1), self.dtype_of(expr.orelse, scope, depth + 1)])
        if isinstance(expr, ast.Subscript):
            return self._looked_up(expr, scope, depth)
        if isinstance(expr, ast.Call):
            return self._torch_getattr(expr)
        return None

    def _looked_up(self, expr: ast.Subscript, scope: ast.AST | None, depth: int) -> DTypes:
        """``{"bf16": torch.bfloat16, ...}[key]``: any value of the table (the key is rarely known)."""
        table = self.table_of(expr, scope)
        if table is not None:
            return union([self.dtype_of(v, scope, depth + 1) for v in table.values])
        return None

    def table_of(self, expr: ast.Subscript, scope: ast.AST | None = None) -> ast.Dict | None:
        """The dict literal a subscript looks a key up in: written in place, or bound once to the name it reads."""
        table = expr.value
        if isinstance(table, ast.Name):
            bound = self.src.bindings(table, scope or self.src.scope(expr))
            table = bound[-1][1] if len(bound) == 1 else table
        return table if isinstance(table, ast.Dict) else None

    def _torch_getattr(self, call: ast.Call) -> DTypes:
        """``getattr(torch, "bfloat16")``."""
        if isinstance(call.func, ast.Name) and call.func.id == "getattr" and len(call.args) >= 2:
            if self.src.imports.qualname(call.args[0]) == "torch" and isinstance(call.args[1], ast.Constant):
                return TORCH_DTYPES.get(f"torch.{call.args[1].value}")
        return None

    def _through_bindings(self, expr, scope, depth, resolve, *, flow_sensitive: bool) -> DTypes:
        scope = scope or self.src.scope(expr)
        bindings = self.src.bindings(expr, scope)
        if flow_sensitive:
            line = getattr(expr, "lineno", 0)
            before = [b for b in bindings if b[0] < line]
            bindings = before[-1:]
        if not bindings:
            return None
        parts = []
        for line, value in bindings:
            if value is None or value is expr:
                return None
            # `self.precision = precision` in __init__: the value means what it means where it was assigned
            parts.append(resolve(value, self.src.scope(value) if isinstance(expr, ast.Attribute) else scope, depth + 1))
        if any(p is None for p in parts):
            return None
        return union(parts)

    # --- tensors ---------------------------------------------------------------------------------

    def cast_dtype(self, call: ast.Call, scope: ast.AST | None = None) -> DTypes:
        """The dtype a call casts or creates its result in, if it is a cast or a factory with ``dtype=``."""
        func = call.func
        if isinstance(func, ast.Attribute):
            if func.attr in CAST_METHODS and not call.args and not call.keywords:
                return CAST_METHODS[func.attr]
            if func.attr in ("to", "type"):
                kw = keyword(call, "dtype")
                if kw is not None:
                    return self.dtype_of(kw, scope)
                for arg in call.args[:2]:
                    found = self.dtype_of(arg, scope)
                    if found:
                        return found
                return None
        if torch_factory(self.src.imports.qualname(func)) is not None:
            return self.dtype_of(keyword(call, "dtype"), scope)
        return None

    def tensor_dtype(self, expr: ast.AST | None, scope: ast.AST | None = None, depth: int = 0) -> DTypes:
        if expr is None or depth > MAX_DEPTH:
            return None
        if isinstance(expr, ast.Call):
            return self._call_dtype(expr, scope, depth)
        if isinstance(expr, ast.Subscript):
            return self.tensor_dtype(expr.value, scope, depth + 1)
        if isinstance(expr, ast.Attribute) and expr.attr in ("logits", "last_hidden_state", "data"):
            inner = self.tensor_dtype(expr.value, scope, depth + 1)
            if inner is not None:
                return inner
        if isinstance(expr, (ast.Name, ast.Attribute)):
            return self._through_bindings(expr, scope, depth, self.tensor_dtype, flow_sensitive=True)
        if isinstance(expr, ast.BinOp):
            left = self.tensor_dtype(expr.left, scope, depth + 1)
            right = self.tensor_dtype(expr.right, scope, depth + 1)
            if isinstance(expr.right, ast.Constant):
                return left
            if isinstance(expr.left, ast.Constant):
                return right
            return left if left is not None and left == right else None
        return None

    def _call_dtype(self, expr: ast.Call, scope: ast.AST | None, depth: int) -> DTypes:
        """A call's result: a cast or factory says its dtype; ``.to(device)``, ``.type_as(y)`` and dtype-preserving
        methods pass their tensor's on; a call of a half-cast model returns half activations."""
        found = self.cast_dtype(expr, scope)
        if found is not None:
            return found or None
        func = expr.func
        if isinstance(func, ast.Name):
            return self.half_models[func.id][0] if func.id in self.half_models else None
        if not isinstance(func, ast.Attribute):
            return None
        if func.attr == "type_as" and expr.args:
            return self.tensor_dtype(expr.args[0], scope, depth + 1)
        if func.attr == "to":
            return self._to_dtype(expr, func, scope, depth)
        if func.attr == "view" and (expr.args or expr.keywords) and self._dtype_argument(expr, scope):
            return self._dtype_argument(expr, scope)  # ``x.view(torch.int16)``: the bits, reinterpreted, are int16
        name = self.src.imports.qualname(func)
        if name is None and func.attr in PRESERVING:
            return self.tensor_dtype(func.value, scope, depth + 1)
        if name and name.startswith("torch.") and func.attr in PRESERVING and expr.args:
            return self.tensor_dtype(expr.args[0], scope, depth + 1)
        return None

    def _dtype_argument(self, call: ast.Call, scope: ast.AST | None) -> DTypes:
        arg = call.args[0] if len(call.args) == 1 else keyword(call, "dtype")
        if arg is None or not isinstance(arg, (ast.Attribute, ast.Name)):
            return None
        found = self.dtype_of(arg, scope)
        if found:
            return found
        name = self.src.imports.qualname(arg) or ""
        return frozenset({"int"}) if _INT_DTYPE.match(name) else None

    def _to_dtype(self, expr: ast.Call, func: ast.Attribute, scope: ast.AST | None, depth: int) -> DTypes:
        """``x.to(device)`` keeps x's dtype; ``x.to(y)`` takes y's (for a plain name y)."""
        if expr.args and not keyword(expr, "dtype"):
            first = expr.args[0]
            if _is_device(first):
                return self.tensor_dtype(func.value, scope, depth + 1)
            return self.tensor_dtype(first, scope, depth + 1) if isinstance(first, ast.Name) else None
        if not expr.args and keyword(expr, "device") is not None:
            return self.tensor_dtype(func.value, scope, depth + 1)
        return None

    # --- conditions ------------------------------------------------------------------------------

    def fp16_polarity(self, expr: ast.AST | None, scope: ast.AST | None = None, depth: int = 0) -> int:
        """+1 if `expr` being true implies fp16 (or not-bf16), -1 if it implies bf16 (or not-fp16), else 0."""
        if expr is None or depth > MAX_DEPTH:
            return 0
        if isinstance(expr, ast.Constant):
            return 1 if expr.value is False else 0  # enabled=False: never active
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            return self._negated_polarity(expr.operand, scope, depth)
        if isinstance(expr, ast.BoolOp):
            signs = [self.fp16_polarity(v, scope, depth + 1) for v in expr.values]
            if isinstance(expr.op, ast.And):
                return 1 if 1 in signs else (-1 if -1 in signs else 0)
            return signs[0] if signs and all(s == signs[0] for s in signs) else 0
        if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
            return self._compare_polarity(expr, scope, depth)
        if isinstance(expr, ast.Call):
            return self.fp16_polarity(expr.func, scope, depth + 1) if isinstance(expr.func, (ast.Name, ast.Attribute)) else 0
        if isinstance(expr, (ast.Name, ast.Attribute)):
            return self._name_polarity(expr, scope, depth)
        return 0

    def _negated_polarity(self, expr: ast.AST, scope: ast.AST | None, depth: int) -> int:
        """The polarity of ``not expr``: De Morgan for `and`/`or` (``not (a or b)`` is ``not a and not b``, so one
        disjunct that says bf16 makes the negation say fp16), the opposite sign otherwise."""
        if isinstance(expr, ast.BoolOp):
            negated = [ast.UnaryOp(op=ast.Not(), operand=v) for v in expr.values]
            flipped = ast.BoolOp(op=ast.Or() if isinstance(expr.op, ast.And) else ast.And(), values=negated)
            return self.fp16_polarity(flipped, scope, depth + 1)
        constant = self._constant_flag(expr, scope)
        if constant is not None:  # ``not False`` is always true: it gates nothing, it does not say "not fp16"
            return self.fp16_polarity(ast.Constant(value=not constant), scope, depth + 1)
        return -self.fp16_polarity(expr, scope, depth + 1)

    def _constant_flag(self, expr: ast.AST, scope: ast.AST | None) -> bool | None:
        """The truth of a literal, or of a flag whose name says no dtype and that the file binds only to literals of
        one truth (``args.fp32_resume = False``, whatever the command line gives it): a `False` is "never on", which
        vacuously implies fp16, but its negation is "always on", which implies nothing."""
        if isinstance(expr, ast.Constant):
            return bool(expr.value)
        if not isinstance(expr, (ast.Name, ast.Attribute)) or name_polarity(expr.id if isinstance(expr, ast.Name) else expr.attr):
            return None
        bound = self.src.bindings(expr, scope or self.src.scope(expr))
        truths = {bool(v.value) if isinstance(v, ast.Constant) else None for _, v in bound}
        return truths.pop() if len(truths) == 1 and bound else None

    def _name_polarity(self, expr: ast.Name | ast.Attribute, scope: ast.AST | None, depth: int) -> int:
        """A flag named like a dtype (``args.fp16``), else what every value assigned to it says."""
        sign = name_polarity(expr.id if isinstance(expr, ast.Name) else expr.attr)
        if sign:
            return sign
        bindings = self.src.bindings(expr, scope or self.src.scope(expr))
        signs = {self._binding_polarity(v, scope, depth) if v is not None else 0 for _, v in bindings}
        sign = signs.pop() if len(signs) == 1 else 0
        if not sign and isinstance(expr, ast.Name):
            sign = self._passed_polarity(expr, bindings, depth)
        return sign or self._selected_dtype_polarity(expr, scope, depth)

    def _passed_polarity(self, expr: ast.Name, bindings: list, depth: int) -> int:
        """A parameter its function never rebinds, read at every call of the function in this file (a method called as
        ``self.method(...)`` from its class, a module-level function by name): what every caller passes says the
        same, in the caller's scope (``scaler_enabled = use_scaler and amp_type == torch.float16`` handed to the
        method that builds the scaler)."""
        fn = self.src.scope(expr)
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or any(line != fn.lineno for line, _ in bindings):
            return 0
        params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        if expr.id not in params:
            return 0
        owner = self.src.parents.get(fn)
        position = params.index(expr.id) - (1 if isinstance(owner, ast.ClassDef) else 0)
        signs = set()
        for call in self.calls_of(fn, owner):
            value = argument(call, position, expr.id)
            if value is None or any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return 0
            signs.add(self.fp16_polarity(value, self.src.scope(call), depth + 1))
        return signs.pop() if len(signs) == 1 else 0

    def calls_of(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, owner: ast.AST | None) -> list[ast.Call]:
        """The calls of `fn`: ``self.fn(...)``/``cls.fn(...)`` inside its class, or ``fn(...)`` of a module-level
        function (none for a function nested in another)."""
        if isinstance(owner, ast.ClassDef):
            return [c for c in self.src.calls if isinstance(c.func, ast.Attribute) and c.func.attr == fn.name
                    and isinstance(c.func.value, ast.Name) and c.func.value.id in ("self", "cls") and self.src.enclosing_class(c) is owner]
        return self.src.calls_of(fn.name) if owner is self.src.tree else []

    def _binding_polarity(self, value: ast.expr, scope: ast.AST | None, depth: int) -> int:
        """What one value bound to a flag says; a literal True bound only inside a branch that fp16 runs take
        (``if cfg.amp_dtype == "fp16": self.enable_scaler = True``) is true in fp16 runs only."""
        sign = self.fp16_polarity(value, scope, depth + 1)
        if sign == 0 and isinstance(value, ast.Constant) and value.value is True and self.fp16_branch(value, depth + 1) is not None:
            return 1
        return sign

    def fp16_branch(self, node: ast.AST, depth: int = 0) -> ast.AST | None:
        """The branch of the enclosing function that only fp16 runs take and that holds `node`, if any."""
        scope = self.src.scope(node)
        for parent, child in self.src.steps(node):
            if self.branch_implies_fp16(parent, child, scope, depth):
                return parent
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                return None
        return None

    def branch_implies_fp16(self, parent: ast.AST, child: ast.AST, scope: ast.AST, depth: int = 0) -> bool:
        """`child` is the body of an `if fp16:`, the else of an `if bf16:`, or after an `fp16 and` ."""
        if isinstance(parent, (ast.If, ast.IfExp)):
            if self._on_off_flag(parent.test, scope):
                return False
            if child in parent.body if isinstance(parent, ast.If) else child is parent.body:
                return self.fp16_polarity(parent.test, scope, depth) == 1
            if child in parent.orelse if isinstance(parent, ast.If) else child is parent.orelse:
                # the else of `if bf16 and x:` is taken by bf16 runs where x fails: the negation decides, not the test
                return self.fp16_polarity(ast.UnaryOp(op=ast.Not(), operand=parent.test), scope, depth) == 1
            return False
        if isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And) and child in parent.values:
            return any(self.fp16_polarity(v, scope, depth) == 1 for v in parent.values[: parent.values.index(child)])
        return False

    def never_taken(self, node: ast.AST) -> ast.If | ast.IfExp | None:
        """The ``if`` of `node`'s function whose branch holding `node` no run takes: its test compares two dtypes
        the file decides (`decided`)."""
        for parent, child in self.src.steps(node):
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                return None
            if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test:
                taken = self.decided(parent.test, self.src.scope(parent))
                in_body = child in parent.body if isinstance(parent, ast.If) else child is parent.body
                if taken is not None and in_body != taken:
                    return parent
        return None

    def decided(self, test: ast.expr, scope: ast.AST) -> bool | None:
        """The truth of a dtype comparison both of whose sides the file resolves to one dtype
        (``self.precision == torch.bfloat16`` where every construction in the file passes ``precision=torch.half``);
        None where a side may hold anything else (a default of a function the file never calls among them)."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq, ast.Is, ast.IsNot))):
            return None
        sides = [self._one_dtype(side, scope, 0) for side in (test.left, test.comparators[0])]
        if None in sides:
            return None
        return (sides[0] == sides[1]) == isinstance(test.ops[0], (ast.Eq, ast.Is))

    def _one_dtype(self, expr: ast.AST, scope: ast.AST, depth: int) -> str | None:
        """The one dtype `expr` holds on every path the file shows, through its bindings; None where unknown."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(expr, ast.Constant) or TORCH_DTYPES.get(self.src.imports.qualname(expr) or "") is not None:
            found = self.dtype_of(expr, scope)
            return next(iter(found)) if found and len(found) == 1 else None
        if not isinstance(expr, (ast.Name, ast.Attribute)) or self._bound_otherwise(expr, scope):
            return None
        seen = set()
        for _, value in self.src.bindings(expr, scope):
            if value is None or value is expr or self.src.default_only(value):
                return None
            seen.add(self._one_dtype(value, self.src.scope(value), depth + 1))
        return seen.pop() if len(seen) == 1 else None

    def _bound_otherwise(self, expr: ast.Name | ast.Attribute, scope: ast.AST) -> bool:
        """May `expr` take a value no assignment shows: a loop or ``with`` target, a walrus, an augmented
        assignment, a ``global``/``nonlocal`` rebinding, ``setattr`` (the bindings index only ``=`` statements), or a
        name the file may rebind unseen (`SourceFile.rebinds_unseen`: nanoGPT's configurator `exec`)."""
        if isinstance(expr, ast.Attribute):
            if any(isinstance(c.func, ast.Name) and c.func.id == "setattr" and len(c.args) > 1
                   and isinstance(c.args[1], ast.Constant) and c.args[1].value == expr.attr for c in self.src.calls):
                return True
            return any(a.attr == expr.attr and not isinstance(a.ctx, ast.Load) and not self._assigned(a) for a in self.src.attributes)
        return self.src.rebinds_unseen or expr.id in self._rebound_in(scope)

    def _rebound_in(self, scope: ast.AST) -> frozenset[str]:
        """The names `scope` binds other than by ``=`` (or declares global/nonlocal): walked once a scope, since a
        module-level test asks it of the whole module for every finding under it."""
        found = self._rebound.get(scope)
        if found is None:
            names: set[str] = set()
            for node in ast.walk(scope):
                if isinstance(node, (ast.Global, ast.Nonlocal)):
                    names.update(node.names)
                elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and not self._assigned(node):
                    names.add(node.id)
            found = self._rebound[scope] = frozenset(names)
        return found

    def _assigned(self, node: ast.AST) -> bool:
        """`node` is a target of an ``=`` statement (the bindings index holds it), not its value."""
        parent = self.src.parents.get(node)
        while isinstance(parent, (ast.Tuple, ast.List, ast.Starred)):
            node, parent = parent, self.src.parents.get(parent)
        return isinstance(parent, (ast.Assign, ast.AnnAssign)) and node is not parent.value

    def _on_off_flag(self, test: ast.expr, scope: ast.AST) -> bool:
        """``if native_amp:`` (``not use_amp``): a flag whose name says no dtype and whose values are True/False (a
        parameter's default among them) is on or off for bf16 and fp16 runs alike; it tells no precision apart."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test = test.operand
        if not isinstance(test, (ast.Name, ast.Attribute)) or name_polarity(test.id if isinstance(test, ast.Name) else test.attr):
            return False
        values = [v for _, v in self.src.bindings(test, scope)]
        return bool(values) and all(isinstance(v, ast.Constant) and isinstance(v.value, bool) for v in values)

    def _selected_dtype_polarity(self, expr: ast.Name | ast.Attribute, scope: ast.AST | None, depth: int) -> int:
        """What the file itself makes of the flag: it picks fp16 when true wherever it picks a dtype by it
        (``dtype = torch.float16 if use_fp16_rather_bf16 else torch.bfloat16``), whatever it is called or bound to."""
        signs = set()
        for pick in self._dtype_picks.get(ast.dump(expr), ()):
            when_true, when_false = self._literal_dtype(pick.body, scope, depth), self._literal_dtype(pick.orelse, scope, depth)
            if {when_true, when_false} == {FP16, BF16}:
                signs.add(1 if when_true == FP16 else -1)
        return signs.pop() if len(signs) == 1 else 0

    @functools.cached_property
    def _dtype_picks(self) -> dict[str, list[ast.IfExp]]:
        """The file's conditional expressions assigned or passed as a keyword, by the spelling of their test: found
        once per file, not once per flag asked about."""
        picks = [a.value for a in self.src.assigns if isinstance(getattr(a, "value", None), ast.IfExp)]
        picks += [k.value for c in self.src.calls for k in c.keywords if isinstance(k.value, ast.IfExp)]
        out: dict[str, list[ast.IfExp]] = {}
        for pick in picks:
            out.setdefault(ast.dump(pick.test), []).append(pick)
        return out

    def _compare_polarity(self, expr: ast.Compare, scope, depth: int) -> int:
        op = expr.ops[0]
        left, right = expr.left, expr.comparators[0]
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            found = union([self._literal_dtype(e, scope, depth) for e in right.elts])
        else:
            found = self._literal_dtype(right, scope, depth) or self._literal_dtype(left, scope, depth)
        if not found:
            return 0
        sign = 1 if found == FP16 else (-1 if found == BF16 else 0)
        if isinstance(op, (ast.NotEq, ast.IsNot, ast.NotIn)):
            sign = -sign
        elif not isinstance(op, (ast.Eq, ast.Is, ast.In)):
            sign = 0
        return sign

    def _literal_dtype(self, expr: ast.AST, scope, depth: int) -> DTypes:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
            return FP16 if expr.value == 16 else None
        found = self.dtype_of(expr, scope, depth + 1) if isinstance(expr, (ast.Constant, ast.Attribute, ast.Name)) else None
        if found is None and isinstance(expr, (ast.Name, ast.Attribute)):
            found = _constant_named_like_a_dtype(expr)
        # a config variable named like a dtype compared to something unknown says nothing
        return found if found and len(found) == 1 else None


# Constants imported from elsewhere whose whole name is a dtype (`FP16`, `dtypes.BF16`): compared against, they
# stand for that dtype. ("HALF" is left out: such a constant is often a set of half dtypes.)
_DTYPE_CONSTANTS = {"fp16": FP16, "float16": FP16, "bf16": BF16, "bfloat16": BF16, "fp32": FP32, "float32": FP32}


def _constant_named_like_a_dtype(expr: ast.Name | ast.Attribute) -> DTypes:
    """`FP16`, `dtypes.BF16`; and an enum member whose words name one dtype (`Precision.AMP_FP16`), which stands for
    that precision when compared against."""
    identifier = expr.id if isinstance(expr, ast.Name) else expr.attr
    if not identifier.isupper():
        return None
    whole = _DTYPE_CONSTANTS.get(identifier.lower())
    if whole is not None or not isinstance(expr, ast.Attribute):
        return whole
    named = {_DTYPE_CONSTANTS[w] for w in tokens(identifier) if w in _DTYPE_CONSTANTS}
    return named.pop() if len(named) == 1 else None


def name_polarity(identifier: str) -> int:
    """+1 for names that say fp16 (``use_fp16``, ``args.half``), -1 for names that say bf16, else 0."""
    words = tokens(identifier)
    bf16, fp16 = bool(words & {"bf16", "bfloat16", "bfloat"}), bool(words & {"fp16", "float16", "half", "f16"})
    return 0 if bf16 == fp16 else (-1 if bf16 else 1)  # both (``use_fp16_rather_bf16``): the name does not say which


def _is_device(expr: ast.AST) -> bool:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (str, int)) and not isinstance(expr.value, bool):
        return True
    if isinstance(expr, ast.Attribute) and expr.attr in ("device", "local_rank", "rank"):
        return True
    return isinstance(expr, ast.Name) and bool(tokens(expr.id) & {"device", "dev", "rank", "gpu"})


def autocast_argument(call: ast.Call, qualname: str, param: str) -> ast.expr | None:
    """An argument of an autocast constructor; `torch.cuda.amp.autocast` has no device parameter."""
    positions = {"device_type": 0, "dtype": 1, "enabled": 2} if qualname == "torch.autocast" else {"dtype": 1, "enabled": 0}
    if param not in positions:
        return None
    return argument(call, positions[param], param)
