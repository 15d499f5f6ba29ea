"""AMP141 kv-cache-dtype: A key/value cache is allocated in a dtype the code fixes, not the dtype of the keys written into it.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP141`)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import CodeHit, Context, assigned_name
from ampdoctor.lint.python.dataflow import BF16, FP16, FP32, HALF, describe, torch_factory
from ampdoctor.lint.python.fp32 import device_move
from ampdoctor.lint.python.resolve import keyword, last_identifier, method, node_words, tokens
from ampdoctor.lint.python.source import parameters

# A cache's name says it holds keys or values (``k_cache``, ``cache_v``, ``inference_key_memory``, ``kv_cache``), or
# is the ``past`` a decoder's attention extends (``layer_past``).
_STORE = frozenset({"cache", "cached", "past", "memory", "mem"})
_KV = frozenset({"k", "v", "key", "keys", "value", "values", "kv"})
_PAST = (frozenset({"past"}), frozenset({"layer", "past"}))
_FLOATS = FP32 | HALF
# Casts whose dtype argument is the run's compute dtype: a dtype variable that also casts the model, its inputs or
# opens autocast is chosen for the whole run, and a cache allocated in it follows the model.
_CASTS = frozenset({"to", "type"})


def kv_cache_name(name: str | None) -> bool:
    if not name:
        return False
    words = tokens(name)
    return bool(words & _STORE and words & _KV) or words in _PAST


# Methods a freshly allocated tensor is moved or cast by on its way to the name it is stored under
# (``torch.zeros(shape).cuda().half()``): a cast fixes the cache's dtype as a ``dtype=`` argument would.
_CAST_METHODS = {"half": FP16, "bfloat16": BF16, "float": FP32}
_MOVES = frozenset({"cuda", "cpu", "contiguous", "zero_", "fill_", "requires_grad_", "pin_memory"})
# Calls that store their argument in a container: ``self.key_cache.append(torch.zeros(...))``.
_ADDS = frozenset({"append", "extend", "insert"})


@dataclass(frozen=True)
class Allocation:
    """A cache allocation: the name it is stored under, the expression that gives its dtype (the factory's ``dtype=``
    or a later ``.to(dtype)``) or the dtypes a ``.half()`` fixes."""

    name: str
    given: ast.expr | None
    cast: frozenset | None


def _allocated_cache(ctx: Context, call: ast.Call) -> Allocation | None:
    """Where `call` is a torch factory (not a ``*_like`` one, which follows its input) whose result is stored as a
    key/value cache: assigned, registered as a buffer, appended to a list, or one element of a tuple, list, dict or
    comprehension so stored (``past = [(torch.zeros(...), torch.zeros(...)) for _ in layers]``), after the moves and
    casts chained on it (``.cuda().half()``)."""
    made = torch_factory(ctx.qualname(call.func))
    if made is None or made.endswith("_like"):
        return None
    node, given, cast = _chain(ctx, call, keyword(call, "dtype"))
    name, words = _stored_name(ctx, node)
    if not kv_cache_name(name) and not (name and kv_cache_name(f"{name}_{'_'.join(sorted(words))}")):
        return None
    return Allocation(name or "", given, cast)


def _chain(ctx: Context, node: ast.expr, given: ast.expr | None) -> tuple[ast.expr, ast.expr | None, frozenset | None]:
    """Follow the methods chained on a new tensor: moves keep its dtype, a cast (``.half()``, ``.to(torch.float16)``,
    ``.to(dtype=d)``) replaces it. (the outermost call, the dtype expression, the dtypes a dtype-named cast fixes)."""
    cast: frozenset | None = None
    while True:
        parent = ctx.src.parents.get(node)
        outer = ctx.src.parents.get(parent) if isinstance(parent, ast.Attribute) else None
        if not (isinstance(outer, ast.Call) and outer.func is parent and parent.value is node):
            return node, given, cast
        if parent.attr in _CAST_METHODS:
            given, cast = None, _CAST_METHODS[parent.attr]
        elif parent.attr in ("to", "type"):
            target = keyword(outer, "dtype") or next((a for a in outer.args if _dtype_like(ctx, a)), None)
            if target is not None or (outer.args and not device_move(outer)):
                given, cast = target, None  # a dtype, or another tensor's (``.to(k)``), which it then follows
        elif parent.attr not in _MOVES:
            return node, given, cast
        node = outer


def _dtype_like(ctx: Context, expr: ast.expr) -> bool:
    """An argument of ``.to(...)`` that is a dtype rather than a device or a tensor: a dtype the dataflow knows, or a
    name that says so (``dtype``, ``self.cache_dtype``)."""
    if ctx.flow.dtype_of(expr, ctx.src.scope(expr)):
        return True
    return "dtype" in tokens(last_identifier(expr) or "")


def _stored_name(ctx: Context, node: ast.expr) -> tuple[str | None, frozenset]:
    """(the name a value is stored under, the words of the dict keys it sits under): through conditionals, tuples,
    lists, dict values and comprehensions, up to an assignment, a ``register_buffer`` or an ``.append``."""
    words: set[str] = set()
    while True:
        parent = ctx.src.parents.get(node)
        if isinstance(parent, ast.IfExp) and node is not parent.test:
            node = parent
        elif isinstance(parent, (ast.List, ast.Tuple)) and not _unpacked(ctx, parent):
            node = parent
        elif isinstance(parent, (ast.ListComp, ast.GeneratorExp)) and node is parent.elt:
            node = parent
        elif isinstance(parent, ast.Dict) and node in parent.values:
            key = parent.keys[parent.values.index(node)]
            words |= tokens(str(key.value)) if isinstance(key, ast.Constant) else set()
            node = parent
        else:
            break
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and parent.func.attr in _ADDS and node in parent.args:
        return last_identifier(parent.func.value), frozenset(words)
    if isinstance(node, ast.Call):
        return assigned_name(ctx, node), frozenset(words)
    return _assigned_conditional(ctx, node), frozenset(words)


def _unpacked(ctx: Context, values: ast.List | ast.Tuple) -> bool:
    """``a, b = x, y``: each value is stored under its own target (`assigned_name` reads which)."""
    parent = ctx.src.parents.get(values)
    return isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], (ast.Tuple, ast.List))


def _assigned_conditional(ctx: Context, node: ast.AST) -> str | None:
    parent = ctx.src.parents.get(node)
    if isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1 \
            and isinstance(parent.targets[0], (ast.Name, ast.Attribute)):
        return last_identifier(parent.targets[0])
    return None


def _fixed(ctx: Context, expr: ast.AST, scope: ast.AST) -> frozenset | None:
    """The float dtypes `expr` surely is, when the code writes them (a literal, a name bound to literals); None where
    it follows something else (a tensor's or module's dtype, an argument a caller may give, the run's precision
    option) or is the run's compute dtype."""
    if _chosen_elsewhere(ctx, expr, scope):
        return None
    dtypes = ctx.flow.dtype_of(expr, scope)
    if not dtypes or not dtypes <= _FLOATS or _run_dtype(ctx, expr, scope):
        return None
    return dtypes


def _chosen_elsewhere(ctx: Context, expr: ast.AST, scope: ast.AST, depth: int = 0) -> bool:
    """The dtype a name or attribute holds may come from outside the code that binds it: a parameter's default that
    callers the file does not show may override (``dtype=torch.bfloat16``, ``self.dtype = dtype or torch.float32``), or
    a value picked by a test of the run's precision option (``if cfg.dtype == "bf16": dtype = torch.bfloat16``)."""
    if depth > 3 or not isinstance(expr, (ast.Name, ast.Attribute)):
        return False
    for _, value in ctx.src.bindings(expr, scope):
        if value is None:
            continue
        if ctx.src.default_only(value) or _picked_by_precision(ctx, value):
            return True
        inner = ctx.src.scope(value) if isinstance(expr, ast.Attribute) else scope
        if any(_chosen_elsewhere(ctx, n, inner, depth + 1) for n in ast.walk(value) if isinstance(n, (ast.Name, ast.Attribute))
               and n is not value and isinstance(getattr(n, "ctx", None), ast.Load) and not ctx.qualname(n)):
            return True
    return False


# Words of a test that picks the run's precision (an option, a config value), not its device.
_PRECISION_WORDS = frozenset({"bf16", "fp16", "fp32", "dtype", "precision", "half", "float16", "bfloat16", "amp", "mixed"})


def _picked_by_precision(ctx: Context, value: ast.AST) -> bool:
    """`value` is bound on one side of a test that reads the run's precision (``if args.dtype == "bf16":``,
    ``torch.bfloat16 if use_bf16 else torch.float32``)."""
    for parent, child in ctx.src.steps(value):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test:
            words = {w for n in ast.walk(parent.test) for w in node_words(n)}
            if words & _PRECISION_WORDS:
                return True
    if isinstance(value, ast.IfExp):
        return bool({w for n in ast.walk(value.test) for w in node_words(n)} & _PRECISION_WORDS)
    return False


def _run_dtype(ctx: Context, expr: ast.AST, scope: ast.AST) -> bool:
    """A name that also casts something in its scope (``model.to(dtype)``, ``x.to(dtype=dtype)``), loads a model in it
    (``torch_dtype=dtype``) or opens autocast in it (``torch.autocast("cuda", dtype=dtype)``): the run's compute
    dtype, which the model follows too."""
    if not isinstance(expr, ast.Name):
        return False
    for call in ctx.src.calls_in(ctx.src.enclosing_function(expr)):
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in _CASTS and ctx.qualname(func) is None:
            given = [*call.args, *(kw.value for kw in call.keywords if kw.arg == "dtype")]
        elif "autocast" in (ctx.qualname(func) or ""):
            given = [kw.value for kw in call.keywords if kw.arg == "dtype"]
        else:
            given = [kw.value for kw in call.keywords if kw.arg == "torch_dtype"]
        if any(isinstance(g, ast.Name) and g.id == expr.id for g in given):
            return True
    return False


def _parameter(fn: ast.AST | None, expr: ast.AST) -> tuple[int, ast.arg, ast.expr | None] | None:
    """(position, parameter, default) where `expr` is a parameter of `fn` that its body never rebinds."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not isinstance(expr, ast.Name):
        return None
    for index, (arg, default) in enumerate(parameters(fn.args)):
        if arg.arg == expr.id:
            rebound = any(isinstance(n, ast.Name) and n.id == expr.id and isinstance(n.ctx, ast.Store) for n in ast.walk(fn))
            return None if rebound else (index - (1 if fn.args.args and fn.args.args[0].arg == "self" else 0), arg, default)
    return None


def _constructions(ctx: Context, fn: ast.FunctionDef) -> list[ast.Call]:
    """The file's calls that run `fn`: ``Cache(...)`` for a class's ``__init__``, ``make_cache(...)`` for a function
    of the module."""
    cls = ctx.src.enclosing_class(fn)
    if cls is None:
        return ctx.src.calls_of(fn.name) if fn in ctx.src.tree.body else []
    if method(cls, fn.name) is not fn:
        return []
    if fn.name == "__init__":
        return ctx.src.calls_of(cls.name)
    return _method_calls(ctx, fn.name)


def _method_calls(ctx: Context, name: str) -> list[ast.Call]:
    """``model.setup_caches(...)``: the file's calls of a public method that one class of the file defines (another
    class's method of that name could be the one called)."""
    owners = [c for c in ctx.src.classes if method(c, name) is not None]
    if len(owners) != 1 or name.startswith("__"):
        return []
    return [c for c in ctx.src.calls if isinstance(c.func, ast.Attribute) and c.func.attr == name]


def _passed(ctx: Context, call: ast.Call, position: int, name: str) -> tuple[bool, ast.expr | None]:
    """(known, value): what a call passes for a parameter (None: it omits it and the default applies); known is False
    where the call may pass it unseen (``*args``, ``**kwargs`` that are no dict literal without the name)."""
    value = keyword(call, name)
    if value is not None:
        return True, value
    if any(isinstance(a, ast.Starred) for a in call.args):
        return False, None
    if position < len(call.args):
        return True, call.args[position]
    for kw in call.keywords:
        if kw.arg is None and not _dict_without(ctx, kw.value, name, ctx.src.scope(call)):
            return False, None
    return True, None


def _dict_without(ctx: Context, expr: ast.AST, key: str, scope: ast.AST) -> bool:
    """``**{"a": 1}`` or ``**kwargs`` with ``kwargs = {"a": 1}`` bound once: a dict literal that has no `key`."""
    if isinstance(expr, ast.Name):
        bound = ctx.src.bindings(expr, scope)
        expr = bound[0][1] if len(bound) == 1 and bound[0][1] is not None else expr
    if not isinstance(expr, ast.Dict) or any(k is None for k in expr.keys):
        return False
    return all(not (isinstance(k, ast.Constant) and k.value == key) for k in expr.keys)


def _fixed_by_callers(ctx: Context, fn: ast.AST | None, given: ast.Name, depth: int = 0) -> Iterator[tuple[ast.AST, frozenset, str]]:
    """The cache's dtype is a parameter of the function that allocates it: each call of that function in the file
    that omits it (the default is a literal dtype) or passes a dtype the caller fixes, as (where, dtypes, how). A
    caller that passes a parameter of its own on (``setup_caches(..., dtype=torch.bfloat16)`` building
    ``KVCache(..., dtype)``) is followed to its own callers."""
    found = _parameter(fn, given)
    if found is None or depth > 2:
        return
    position, arg, default = found
    what = f"`{_described(ctx, fn)}`"
    for site in _constructions(ctx, fn):
        known, value = _passed(ctx, site, position, arg.arg)
        if not known:
            continue
        if value is None:
            dtypes = _fixed(ctx, default, fn) if default is not None else None
            if dtypes:
                yield site, dtypes, f"the default of {what}'s `{arg.arg}` parameter, which this call leaves"
            continue
        caller = ctx.src.enclosing_function(site)
        if isinstance(value, ast.Name) and _parameter(caller, value) is not None:
            yield from _fixed_by_callers(ctx, caller, value, depth + 1)
            continue
        scope = ctx.src.scope(site)
        dtypes = _fixed(ctx, value, scope)
        if dtypes:
            where = _binding(ctx, value, scope) or site
            yield where, dtypes, f"`{ast.unparse(value)[:40]}` (line {where.lineno}), which {what} is given"


def _described(ctx: Context, fn: ast.FunctionDef) -> str:
    """``KVCache`` for a class's ``__init__``, ``Model.setup_caches`` for another method, the function's name else."""
    owner = ctx.src.enclosing_class(fn)
    if owner is None:
        return fn.name
    return owner.name if fn.name == "__init__" else f"{owner.name}.{fn.name}"


def _binding(ctx: Context, value: ast.AST, scope: ast.AST) -> ast.AST | None:
    """Where a name passed as the dtype was bound to the literals it holds, in the caller's scope."""
    if not isinstance(value, ast.Name):
        return None
    bound = [v for _, v in ctx.src.bindings(value, scope) if v is not None and ctx.src.scope(v) is scope]
    return bound[-1] if len(bound) == 1 else None


def _severity(ctx: Context, node: ast.AST, dtypes: frozenset) -> tuple[Severity, str]:
    """A warning where the mismatch is in the code: an fp32 cache where the file, or the project, casts the model to
    half (its keys are half, the cache upcasts them and attention meets fp32 keys beside half queries). A note
    otherwise: the cache is right only for the dtype it names, and a run of the model in another one breaks it."""
    if dtypes <= FP32:
        cast = ctx.facts.local_half_model
        if cast is not None:
            return Severity.WARNING, f"; the file casts its model to {describe(cast.dtypes)} (line {cast.node.lineno}), so its keys are not fp32"
        project = ctx.half_model_at(node)
        if project is not None:
            return Severity.WARNING, f"; the project runs this model as {project.describe()}, so its keys are not fp32"
    return Severity.INFO, ""


@code_check("AMP141", triggers=("cache", "past", "memory", "_mem"), also=(("dtype", ".half()", ".bfloat16()"), ("zeros", "empty", "ones", "full", "rand")))
def kv_cache_in_a_fixed_dtype(ctx: Context) -> Iterator[CodeHit]:
    """A key/value cache allocated in a dtype the code fixes (``torch.zeros(shape, dtype=torch.float32)``, the default
    ``dtype=torch.bfloat16`` of a cache class that its construction leaves, a dtype picked by device) rather than
    one read off the model or the keys: a model run in any other dtype writes its keys rounded or upcast into it and
    reads them back beside queries of its own dtype, which SDPA, flash-attn and a matmul refuse."""
    seen: set[int] = set()
    for call in ctx.src.calls:
        made = _allocated_cache(ctx, call)
        if made is None:
            continue
        for where, dtypes, how in _fixed_at(ctx, call, made):
            if id(where) in seen:
                continue
            seen.add(id(where))
            severity, why = _severity(ctx, call, dtypes)
            yield where, (f"the key/value cache `{made.name}` is allocated in {describe(dtypes)}, fixed by {how}, not in the dtype "
                          f"of the keys and values written into it{why}: a model run in another dtype stores its keys rounded "
                          f"or upcast and reads them back beside queries of its own dtype, which SDPA and flash-attn refuse; "
                          f"allocate the cache in the model's dtype (its weights' `.dtype`, or the keys' `k.dtype`)"), severity


def _fixed_at(ctx: Context, call: ast.Call, made: Allocation) -> list[tuple[ast.AST, frozenset, str]]:
    """Where and how the cache's dtype is fixed: a ``.half()`` chained on it, the callers that leave or pass a literal
    for the parameter it is allocated in, or the literal (or name bound to literals) it is given."""
    if made.cast is not None:
        return [(call, made.cast, f"`.{next(k for k, v in _CAST_METHODS.items() if v == made.cast)}()`")]
    given = made.given
    if given is None:
        return []  # the default dtype: `torch.set_default_dtype` may make it the model's
    scope = ctx.src.scope(call)
    fn, param = _as_parameter(ctx, call, given)
    found = list(_fixed_by_callers(ctx, fn, param)) if param is not None else []
    if not found and param is None:
        dtypes = _fixed(ctx, given, scope)
        found = [(call, dtypes, f"`{ast.unparse(given)[:40]}`")] if dtypes else []
    return found


def _as_parameter(ctx: Context, call: ast.Call, given: ast.expr) -> tuple[ast.AST | None, ast.Name | None]:
    """(the function, the parameter) the cache's dtype is: a parameter of the function that allocates it, or an
    attribute the class's ``__init__`` binds once to one of its parameters (``self.dtype = dtype``)."""
    fn = ctx.src.enclosing_function(call)
    if isinstance(given, ast.Name):
        return fn, given if _parameter(fn, given) is not None else None
    cls = ctx.src.enclosing_class(call)
    if not (isinstance(given, ast.Attribute) and isinstance(given.value, ast.Name) and given.value.id == "self" and cls is not None):
        return fn, None
    bound = [v for _, v in ctx.src.bindings(given, ctx.src.scope(call)) if v is not None]
    init = method(cls, "__init__")
    if len(bound) != 1 or not isinstance(bound[0], ast.Name) or ctx.src.enclosing_function(bound[0]) is not init:
        return fn, None
    return init, bound[0] if _parameter(init, bound[0]) is not None else None
