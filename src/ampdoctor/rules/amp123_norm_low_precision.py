"""AMP123 norm-low-precision: LayerNorm/RMSNorm variance is computed in bf16/fp16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP123`)."""

from __future__ import annotations

import ast
import functools
from typing import Callable, Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import FLOAT_UP, HALF_WORDS, MATMUL_CALLS, CodeHit, Context, half_dtypes_run
from ampdoctor.lint.python.dataflow import FP16, HALF, describe
from ampdoctor.lint.python.embedded import half_weights_config
from ampdoctor.lint.python.project import cpu_autocast_line
from ampdoctor.lint.python.resolve import keyword, last_identifier, self_attribute, tokens

SQUARES = frozenset({"torch.square"})


VARIANCES = frozenset({"torch.var", "torch.var_mean"})


def _is_two(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 2


def _squared(expr: ast.AST, ctx: Context) -> ast.AST | None:
    """The tensor squared in `expr`: ``x.pow(2)``, ``torch.pow(x, 2)``, ``x ** 2``, ``x * x``, ``x.square()``."""
    if isinstance(expr, ast.BinOp):
        if (isinstance(expr.op, ast.Pow) and _is_two(expr.right)) or (isinstance(expr.op, ast.Mult) and ast.dump(expr.left) == ast.dump(expr.right)):
            return expr.left
        return None
    if not isinstance(expr, ast.Call):
        return None
    name = ctx.qualname(expr.func)
    if name == "torch.pow" and len(expr.args) == 2 and _is_two(expr.args[1]):
        return expr.args[0]
    if name in SQUARES and expr.args:
        return expr.args[0]
    if name is None and isinstance(expr.func, ast.Attribute):
        return _squared_by_method(expr)
    return None


def _squared_by_method(call: ast.Call) -> ast.AST | None:
    """``x.square()`` or ``x.pow(2)`` on a tensor expression the imports do not name."""
    assert isinstance(call.func, ast.Attribute)
    if call.func.attr == "square" and not call.args:
        return call.func.value
    if call.func.attr == "pow" and len(call.args) == 1 and _is_two(call.args[0]):
        return call.func.value
    return None


def _variance_input(call: ast.Call, ctx: Context) -> ast.AST | None:
    """The tensor whose variance `call` computes by hand: ``x.pow(2).mean(-1)``, ``torch.mean(x * x)``,
    ``(x - mu).pow(2).mean(-1)`` (-> ``x``), ``x.var(-1)``, ``torch.var_mean(x)``; None if it is no such call or
    asks for ``dtype=torch.float32`` itself."""
    if any(kw.arg in ("keepdims", "ddof") for kw in call.keywords):
        return None  # NumPy's spelling: a reference implementation, not a torch norm
    inner = _reduced(call, ctx)
    if inner is None:
        return None
    if _is_variance_call(call, ctx):
        base = inner
    else:
        base = _squared(inner, ctx)
        asked = ctx.flow.dtype_of(keyword(call, "dtype"))
        if base is None or (asked and asked <= FLOAT_UP):
            return None
    if isinstance(base, ast.BinOp) and isinstance(base.op, ast.Sub):
        base = base.left
    return base


def _reduced(call: ast.Call, ctx: Context) -> ast.AST | None:
    """What a mean or variance call reduces: ``x`` of ``x.mean(-1)``, ``torch.mean(x)``, ``x.var()``,
    ``torch.var_mean(x)``; None for any other call."""
    name, func = ctx.qualname(call.func), call.func
    if name is None and isinstance(func, ast.Attribute) and func.attr in ("mean", "var"):
        return func.value
    if name in ("torch.mean", *VARIANCES) and call.args:
        return call.args[0]
    return None


def _norm_name(name: str) -> bool:
    """``RMSNorm``, ``QKNorm``, ``rms_norm``, ``LayerNormalization``; not ``Normal`` (distributions), not
    ``normuon_update`` (an optimizer whose statistics are no normalisation layer), and not the verb ``normalize``
    alone, which as often standardises data (``normalize_images``) as it normalises activations."""
    return any(w == "norm" or w.endswith("norm") or w in ("normalization", "normalisation") for w in tokens(name))


def _norm_scope(node: ast.AST, ctx: Context, rsqrt_functions: set[ast.AST]) -> ast.AST | None:
    """The class (or, outside a class, the function) of a norm, None when `node` is not in one: a class named like
    a norm, the ``forward`` of another module that takes an rsqrt, or a function named like a norm or taking an
    rsqrt. (A helper method of an attention class that normalises keys is not a norm layer.)"""
    fn = ctx.src.enclosing_function(node)
    cls = ctx.src.enclosing_class(node)
    if cls is not None:
        if _norm_name(cls.name) or (fn is not None and fn.name == "forward" and fn in rsqrt_functions):
            return cls
        return None
    if fn is not None and (_norm_name(fn.name) or (fn in rsqrt_functions and not tokens(fn.name) & _OPTIMIZER_WORDS)):
        return fn
    return None


# An optimizer's second-moment statistics (Adam, Adafactor, NorMuon) are a mean of squares with an rsqrt too, but
# no normalisation layer of the model.
_OPTIMIZER_WORDS = frozenset({"update", "step", "optim", "optimizer", "adam", "adamw", "adafactor", "muon", "normuon", "momentum",
                              "grad", "grads", "lion", "sgd", "shampoo", "soap"})


def _chosen_dtype(expr: ast.AST, ctx: Context, depth: int = 0) -> bool:
    """Was `expr` converted to a dtype chosen at run time before the reduction: ``input.to(computation_dtype)``,
    ``_maybe_convert_to_dtype(a, acc_dtype)``, followed through names, reshapes and views. (A resolved half dtype
    never gets here: the caller reports it first.)"""
    if depth > 4:
        return False
    if isinstance(expr, ast.Call):
        for arg in (*expr.args, *(kw.value for kw in expr.keywords)):
            # `compute_dtype`, `self.acc_dtype`, a `dtype` parameter; not `x.dtype`, which keeps whatever x is
            if isinstance(arg, ast.Name) and "dtype" in tokens(arg.id):
                return True
            if isinstance(arg, ast.Attribute) and arg.attr != "dtype" and "dtype" in tokens(arg.attr):
                return True
        inner = [expr.func.value] if isinstance(expr.func, ast.Attribute) and ctx.qualname(expr.func) is None else []
        return any(_chosen_dtype(e, ctx, depth + 1) for e in (*inner, *expr.args[:1]))
    if isinstance(expr, ast.Subscript):
        return _chosen_dtype(expr.value, ctx, depth + 1)
    if isinstance(expr, ast.BinOp):
        return _chosen_dtype(expr.left, ctx, depth + 1)
    if isinstance(expr, ast.Name):
        before = [b for b in ctx.src.bindings(expr, ctx.src.scope(expr)) if b[0] < expr.lineno]
        return bool(before) and before[-1][1] is not None and _chosen_dtype(before[-1][1], ctx, depth + 1)
    return False


def _callers_keep_out_of_half(ctx: Context, at: ast.Call, base: ast.AST, fn: ast.AST) -> bool:
    """The normalised tensor is a parameter of the norm function `fn`, and every call of `fn` in this file hands it
    a tensor kept out of half precision: one cast to fp32 on the way in (``f(z.to(torch.float32))``,
    ``f(self.embed(c.float()))``), or one the caller leaves alone while it casts another argument of the same call
    (``f(x=x.to(dtype), w=self.weight)``: the caller picks which inputs run in half). Only in a file that casts no
    model of its own to half and enters no half autocast, and a project that does neither: there a tensor the caller
    does not cast keeps the fp32 of the parameters it comes from."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not isinstance(base, ast.Name):
        return False
    position = _parameter_as_passed(ctx, at, base, fn)
    if position is None:
        return False
    calls = [c for c in ctx.src.calls if isinstance(c.func, ast.Name) and c.func.id == fn.name]
    return bool(calls) and all(_call_keeps_out_of_half(ctx, c, base.id, position) for c in calls)


def _parameter_as_passed(ctx: Context, at: ast.Call, base: ast.Name, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    """The position of `base` among the parameters of `fn` (-1: keyword-only) where it still holds what the caller
    passed at `at`, in code that runs no half model and no autocast; None otherwise."""
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    keyword_only = [a.arg for a in fn.args.kwonlyargs]
    if base.id not in params and base.id not in keyword_only:
        return None
    if any(fn.body[0].lineno <= line < at.lineno for line, _ in ctx.src.bindings(base, fn)):
        return None  # rebound in the body before the norm (the parameter itself is bound at the def)
    project = ctx.project
    if ctx.facts.local_half_model is not None or ctx.facts.half_autocast is not None \
            or project.half_model is not None or project.autocast is not None:
        return None
    return params.index(base.id) if base.id in params else -1


def _call_keeps_out_of_half(ctx: Context, call: ast.Call, name: str, position: int) -> bool:
    """Does this call pass the parameter (`name`, at `position`; -1: keyword only) a tensor upcast on the way in, or
    one left uncast beside another argument it casts?"""
    arg = keyword(call, name)
    if arg is None and 0 <= position < len(call.args):
        arg = call.args[position]
    if arg is None or isinstance(arg, ast.Starred):
        return False
    if _upcast_on_the_way_in(arg, ctx):
        return True
    siblings = [a for a in (*call.args, *(kw.value for kw in call.keywords)) if a is not arg]
    return not _cast_here(arg, ctx) and any(_cast_here(a, ctx) for a in siblings)


def _cast_here(expr: ast.AST, ctx: Context) -> bool:
    """``x.to(dtype)``, ``x.half()``, ``x.float()``: the argument is cast where it is passed."""
    return isinstance(expr, ast.Call) and ctx.flow.cast_dtype(expr, ctx.src.scope(expr)) is not None


def _upcast_on_the_way_in(expr: ast.AST, ctx: Context, depth: int = 0) -> bool:
    """`expr` is cast to fp32/fp64, or computed from one that is (through calls' first argument and method
    receivers): ``z.to(torch.float32)``, ``self.embed(c.float())``."""
    if depth > 4 or not isinstance(expr, ast.Call):
        return False
    dtypes = ctx.flow.cast_dtype(expr, ctx.src.scope(expr))
    if dtypes:
        return dtypes <= FLOAT_UP
    inner = [expr.func.value] if isinstance(expr.func, ast.Attribute) and ctx.qualname(expr.func) is None else []
    return any(_upcast_on_the_way_in(e, ctx, depth + 1) for e in (*inner, *expr.args[:1]))


@code_check("AMP123", triggers=HALF_WORDS, also=(("mean(", "var(", "var_mean("),), project=True)
def norm_low_precision(ctx: Context) -> Iterator[CodeHit]:
    # sglang PR #27540: Gemma RMSNorm variance in bf16 -> cosine 0.51 at layer 58; transformers PR #25421.
    # An upcast anywhere in the norm's class counts (Gemma: `self._norm(x.float())`), so only norms that never
    # leave the input dtype are reported, and only in a file that shows half precision.
    if _half_said(ctx) is None:
        return
    candidates = [(call, base) for call in ctx.src.calls if (base := _variance_input(call, ctx)) is not None]
    if not candidates:
        return
    rsqrt_functions = {ctx.src.enclosing_function(c) for c in ctx.src.calls if last_identifier(c.func) == "rsqrt"}
    upcast_scopes = functools.cache(lambda: _upcast_scopes(ctx))  # at the first norm of unknown input dtype that needs it
    for call, base in candidates:
        owner = _norm_scope(call, ctx, rsqrt_functions)
        if owner is None or ctx.src.in_unused_private_method(call):
            continue  # not a norm, or one its class never runs (a reference `_norm` beside a fused kernel)
        said = _half_said(ctx, owner)
        dtypes = ctx.flow.tensor_dtype(base, ctx.src.scope(call))
        if said is None or (dtypes and dtypes <= FLOAT_UP) or (not (dtypes and dtypes & HALF) and _left_open_but_upcast(ctx, call, base, owner, upcast_scopes)):
            continue
        found = _judged(ctx, call, owner, dtypes, said)
        if found is not None:
            yield found


def _judged(ctx: Context, call: ast.Call, owner: ast.AST, dtypes: frozenset | None, said: str) -> CodeHit | None:
    """The finding of a norm that may compute in half: under autocast alone, as what the file applies it to says
    (`_applied_to`): none for the fp32 residual stream, a note where the file does not show what it takes."""
    applied = _applied_to(ctx, owner) if not (dtypes and dtypes & HALF) and _autocast_alone(ctx) else _LOWERED
    if applied is _STREAM:
        return None  # the variance is fp32
    if applied is _LOWERED:
        return _finding(ctx, call, owner, dtypes, said)
    found = _finding(ctx, call, owner, dtypes, f"{said}, where autocast is the only half precision: that is half only where "
                     "the norm takes a half tensor, the output of a layer autocast runs in half (a q/k projection) or a "
                     "residual stream that starts at one; a stream that starts at an embedding stays fp32")
    return found[0], found[1], Severity.INFO


def _autocast_alone(ctx: Context) -> bool:
    """The only half precision this code runs in is autocast's: it enters (or is run under) half autocast, and
    nothing casts a model to half, here or in the project (a training file that casts its model beside its autocast
    included: `Evidence.casts_weights`), nor runs it from a half training config (which may cast the model:
    DeepSpeed, a framework's true-half mode), nor shards it with half parameters (FSDP's `MixedPrecision`). The
    parameters then stay fp32, and so does every tensor computed from them by ops autocast leaves alone (adds,
    multiplies, embeddings)."""
    project = ctx.project
    if ctx.facts.model_casts or half_weights_config(ctx) is not None or project.half_model is not None or project.half is not None \
            or (project.autocast is not None and project.autocast.casts_weights):
        return False
    return ctx.facts.half_autocast is not None or project.autocast is not None


# What autocast made a norm's input: fp32 (the residual stream, an embedding, an add with either), half (an op
# autocast runs in half: a linear or conv layer, a matmul, attention), or not known from this file.
_STREAM, _LOWERED, _UNKNOWN = "stream", "lowered", "unknown"
_LOWERING_CALLS = MATMUL_CALLS | frozenset({"torch.addmm", "torch.nn.functional.linear", "torch.nn.functional.conv1d",
                                            "torch.nn.functional.conv2d", "torch.nn.functional.conv3d",
                                            "torch.nn.functional.scaled_dot_product_attention"})
_LOWERING_LAYERS = frozenset({"torch.nn.Linear", "torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d", "torch.nn.Bilinear",
                              "torch.nn.MultiheadAttention"})
_KEEPS_DTYPE = frozenset({"view", "reshape", "transpose", "permute", "contiguous", "flatten", "unflatten", "squeeze", "unsqueeze",
                          "chunk", "split", "unbind", "expand", "narrow", "movedim", "swapaxes", "clone", "rearrange"})
# Projections whose outputs q/k norms take (`self.q_norm(q)`, `self.k_layernorm(key)`): outputs of a linear layer.
_PROJECTED = frozenset({"q", "k", "qk", "query", "key", "queries", "keys"})


def _applied_to(ctx: Context, owner: ast.AST) -> str:
    """What the file applies the norm `owner` to, under autocast alone: `_LOWERED` where any use takes an op's
    half output, `_STREAM` where every use takes an fp32 one, `_UNKNOWN` where the file builds or calls it in a way
    not followed (a list of norms, a class passed as a factory, a use in another file)."""
    inputs = _norm_inputs(ctx, owner)
    if not inputs:
        return _UNKNOWN
    kinds = {kind if not _projected(name) else _LOWERED for name, arg in inputs for kind in (_made_by(ctx, arg),)}
    return _combined(kinds)


def _combined(kinds: set[str]) -> str:
    """What several values a tensor may be come to: half if any is, fp32 only if all are, else not known."""
    return _LOWERED if _LOWERED in kinds else _STREAM if kinds == {_STREAM} else _UNKNOWN


def _projected(name: str | None) -> bool:
    return name is not None and bool(tokens(name) & _PROJECTED)


def _norm_inputs(ctx: Context, owner: ast.AST) -> list[tuple[str | None, ast.AST]] | None:
    """(the name the norm is used under, the tensor it is given) for each use of `owner` in this file: a call of the
    function, or of a module the file builds from the class (``self.q_norm = RMSNorm(d)`` ... ``self.q_norm(q)``);
    None where a use is not of that form."""
    name = getattr(owner, "name", None)
    if name is None:
        return None
    uses: list[tuple[str | None, ast.AST]] = []
    built: set[str] = set()
    for node in ast.walk(ctx.src.tree):
        if not (isinstance(node, ast.Name) and node.id == name) or node is owner:
            continue
        call = ctx.src.parents.get(node)
        if not (isinstance(call, ast.Call) and call.func is node):
            return None  # passed as a factory, put in a table: its uses are not followed
        if isinstance(owner, ast.ClassDef):
            target = _built_into(ctx, call)
            if target is None:
                return None
            built.add(target)
        elif call.args:
            uses.append((None, call.args[0]))
    for call in ctx.src.calls:
        attr = self_attribute(call.func)  # not `torch.norm(...)` nor a tensor's `.norm(2)`: names the module shares
        if attr in built and call.args:
            uses.append((attr, call.args[0]))
    return uses


def _built_into(ctx: Context, call: ast.Call) -> str | None:
    """``self.norm = Cls(...)``: the attribute the module is built into, None for any other use of the class."""
    stmt = ctx.src.parents.get(call)
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is call:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) == 1:
            return self_attribute(targets[0])
    return None


def _made_by(ctx: Context, expr: ast.AST, depth: int = 0) -> str:
    """What autocast makes of `expr`: `_STREAM` (fp32), `_LOWERED` (half) or `_UNKNOWN`, followed through names,
    reshapes, adds and casts."""
    if depth > 6:
        return _UNKNOWN
    if isinstance(expr, ast.Subscript):
        index = expr.slice
        if isinstance(index, ast.Constant) and type(index.value) is int and index.value >= 0:
            return _element(ctx, expr.value, index.value, depth + 1)  # ``self.attn(x)[0]``: the tuple's element
        return _made_by(ctx, expr.value, depth + 1)
    if isinstance(expr, ast.BinOp):
        if isinstance(expr.op, ast.MatMult):
            return _LOWERED
        # fp32 with half promotes to fp32, half with half or a Python number stays half: one side not known leaves
        # the result not known unless the other is fp32
        sides = {_made_by(ctx, side, depth + 1) for side in (expr.left, expr.right) if not isinstance(side, ast.Constant)}
        return _STREAM if _STREAM in sides else _LOWERED if sides == {_LOWERED} else _UNKNOWN
    if isinstance(expr, ast.Name):
        return _named(ctx, expr, depth)
    if isinstance(expr, ast.Call):
        return _called(ctx, expr, depth)
    return _UNKNOWN


def _named(ctx: Context, expr: ast.Name, depth: int) -> str:
    """Every value the function binds the name to, whatever the order (a loop carries the last one round to its top):
    half if any is, fp32 only if all are. A parameter is the caller's: q and k are a projection's output, any other
    input is not known (a block's hidden states are fp32 only where the stream starts at an embedding, not at a
    linear or conv input projection)."""
    fn = ctx.src.enclosing_function(expr)
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)} if fn is not None else set()
    kinds = set()
    for line, value in ctx.src.bindings(expr, ctx.src.scope(expr)):
        if fn is not None and line == fn.lineno and expr.id in params:
            kinds.add(_LOWERED if _projected(expr.id) else _UNKNOWN)
            continue
        if value is not None:
            kinds.add(_made_by(ctx, value, depth + 1))
            continue
        unpacked = _unpacked_from(ctx, expr.id, line, fn)
        kinds.add(_element(ctx, *unpacked, depth + 1) if unpacked is not None else _UNKNOWN)
    return _combined(kinds)


def _unpacked_from(ctx: Context, name: str, line: int, fn: ast.AST | None) -> tuple[ast.AST, int] | None:
    """The value a tuple assignment on `line` unpacks into `name` from, and the position `name` takes in it
    (``q, k, v = self.qkv(x).chunk(3, -1)``: 0 for q; ``h, _ = self.attn(x)``: 0 for h)."""
    for stmt in ctx.src.assigns:
        if stmt.lineno != line or not isinstance(stmt, ast.Assign) or ctx.src.enclosing_function(stmt) is not fn:
            continue
        for target in stmt.targets:
            if isinstance(target, (ast.Tuple, ast.List)):
                at = next((i for i, e in enumerate(target.elts) if isinstance(e, ast.Name) and e.id == name), None)
                if at is not None:
                    return stmt.value, at
    return None


def _element(ctx: Context, value: ast.AST, at: int, depth: int) -> str:
    """What element `at` of `value` is: a tuple's own element, or the element a module of this file returns in that
    place (an attention block's ``return out, weights``); a split or chunk of one tensor is that tensor's dtype."""
    if isinstance(value, ast.Tuple):
        return _made_by(ctx, value.elts[at], depth) if at < len(value.elts) and not any(isinstance(e, ast.Starred) for e in value.elts) else _UNKNOWN
    attr = self_attribute(value.func) if isinstance(value, ast.Call) else None
    if attr is not None:
        return _module_output(ctx, attr, depth, at)
    return _made_by(ctx, value, depth)


def _called(ctx: Context, call: ast.Call, depth: int) -> str:
    cast = ctx.flow.cast_dtype(call, ctx.src.scope(call))
    if cast:
        return _STREAM if cast <= FLOAT_UP else _LOWERED if cast & HALF else _UNKNOWN
    name = ctx.qualname(call.func)
    if name in _LOWERING_CALLS:
        return _LOWERED
    func = call.func
    if last_identifier(func) in _KEEPS_DTYPE:
        inner = func.value if isinstance(func, ast.Attribute) and name is None else (call.args[0] if call.args else None)
        return _made_by(ctx, inner, depth + 1) if inner is not None else _UNKNOWN
    attr = self_attribute(func)
    if attr is not None:
        return _module_output(ctx, attr, depth)
    return _UNKNOWN


def _module_output(ctx: Context, attr: str, depth: int, at: int | None = None) -> str:
    """What ``self.<attr>(...)`` returns under autocast, from the layer the file builds into that attribute: an
    embedding's fp32 rows, a linear or conv layer's half output, or what the ``forward`` of a module class of this
    file returns (an attention block ending in its output projection is half; with `at`, the element of the tuple
    it returns in that place); any other module is not known."""
    for _, value in ctx.src.bindings(ast.Attribute(value=ast.Name(id="self"), attr=attr), ctx.src.tree):
        if not isinstance(value, ast.Call):
            continue
        layer = ctx.qualname(value.func)
        if layer == "torch.nn.Embedding":
            return _STREAM
        if layer in _LOWERING_LAYERS:
            return _LOWERED
        cls = next((c for c in ctx.src.classes if isinstance(value.func, ast.Name) and c.name == value.func.id), None)
        if cls is not None:
            return _forward_returns(ctx, cls, depth, at)
    return _UNKNOWN


def _forward_returns(ctx: Context, cls: ast.ClassDef, depth: int, at: int | None = None) -> str:
    forward = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "forward"), None)
    returned = [r.value for r in ast.walk(forward) if isinstance(r, ast.Return) and r.value is not None] if forward else []
    kinds = {_made_by(ctx, value, depth + 1) if at is None else _element(ctx, value, at, depth + 1) for value in returned}
    return _combined(kinds)


def _finding(ctx: Context, call: ast.Call, owner: ast.AST, dtypes: frozenset | None, said: str) -> CodeHit:
    where = f"`{owner.name}`" if isinstance(owner, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) else "this norm"
    what = describe(dtypes) if dtypes and dtypes & HALF else "the input dtype"
    found = _by_consequence(ctx, call, dtypes, f"{where} computes the variance `{ast.unparse(call)[:50]}` in {what} {said}")
    return _as_import_fallback(ctx, owner, found)


def _left_open_but_upcast(ctx: Context, call: ast.Call, base: ast.AST, owner: ast.AST, upcast_scopes: Callable[[], set[ast.AST]]) -> bool:
    """A norm whose input dtype the code leaves open, kept out of half all the same (`_kept_out_of_half`), or with an
    upcast somewhere in its class or function (`upcast_scopes()`: `_upcast_scopes`, computed once per file)."""
    return _kept_out_of_half(ctx, call, base, owner) or owner in upcast_scopes()


_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _import_fallback(ctx: Context, owner: ast.AST) -> str | None:
    """The import `owner` stands in for: a norm class or function defined in the ``except ImportError:`` of a ``try``
    that imports the same name (``try: from apex.normalization import FusedLayerNorm as BertLayerNorm`` / ``except
    ImportError: class BertLayerNorm``). It runs only where that import fails; where it succeeds, the imported (fused)
    norm is the one the model builds."""
    name = getattr(owner, "name", None)
    if name is None:
        return None
    for parent, child in ctx.src.steps(owner):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return None
        if isinstance(parent, ast.Try) and isinstance(child, ast.ExceptHandler) and _catches_import_error(child):
            return _imported_as(parent.body, name)
    return None


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return handler.type is None or any(c is not None and last_identifier(c) in _IMPORT_ERRORS for c in caught)


def _imported_as(body: list[ast.stmt], name: str) -> str | None:
    """What the statements import under `name` (``from m import A as name`` -> ``m.A``), or None."""
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if (alias.asname or alias.name.split(".")[0]) == name:
                    module = stmt.module if isinstance(stmt, ast.ImportFrom) else None
                    return f"{module}.{alias.name}" if module else alias.name
    return None


def _as_import_fallback(ctx: Context, owner: ast.AST, found: CodeHit) -> CodeHit:
    """A norm that stands in for an import when it fails is reported as a note: runs in half precision have the
    imported norm as often as not (apex's fused norms, which fp16 training scripts of that era require), and only
    where the import fails does this one run at all."""
    imported = _import_fallback(ctx, owner)
    if imported is None:
        return found
    return found[0], (f"{found[1]} (it stands in for `{imported}` where that cannot be imported, so it runs only "
                      "without it)"), Severity.INFO


_UPCAST = "upcast first: `x.float().pow(2).mean(-1, keepdim=True)`"


def _by_consequence(ctx: Context, call: ast.Call, dtypes: frozenset | None, said: str) -> CodeHit:
    """The finding, as severe as what half precision does to this variance. torch reduces half inputs with an fp32
    accumulator (CPU and CUDA), so only what is rounded before the reduction matters: squares taken in fp16
    overflow past |x| = 256 (a warning); squares taken in bf16 only round (8 significant bits), and a variance call
    squares inside its fp32 accumulator, rounding only its result: notes, with the size of the error."""
    if _is_variance_call(call, ctx):
        return call, (f"{said}: torch accumulates it in fp32 and rounds only the result (which overflows fp16 past "
                      f"65504); for a full-precision norm, {_UPCAST}"), Severity.INFO
    if FP16 & half_dtypes_run(ctx, dtypes):
        return call, f"{said}: squares taken in fp16 overflow to inf past |x| = 256; {_UPCAST}"
    return call, (f"{said}: the squares round to bf16's 8 significant bits (the mean accumulates in fp32), so the "
                  f"variance is off by at most about 0.4%; for a full-precision norm, {_UPCAST}"), Severity.INFO


def _is_variance_call(call: ast.Call, ctx: Context) -> bool:
    """``torch.var(x)``, ``torch.var_mean(x)``, or ``x.var()`` on a tensor the imports do not name."""
    name = ctx.qualname(call.func)
    return name in VARIANCES or (name is None and isinstance(call.func, ast.Attribute) and call.func.attr == "var")


def _kept_out_of_half(ctx: Context, call: ast.Call, base: ast.AST, owner: ast.AST) -> bool:
    """A variance of a tensor of unknown dtype that is not computed in half all the same: its input converted to a
    dtype chosen at run time, every caller keeping it out of half, or squares autocast takes in fp32."""
    return _chosen_dtype(base, ctx) or _callers_keep_out_of_half(ctx, call, base, owner) or _autocast_squares_in_fp32(ctx, call)


def _squares_by_pow(call: ast.Call, ctx: Context) -> bool:
    """A mean of squares taken with `pow` (``x.pow(2).mean(-1)``, ``(x ** 2).mean()``, ``torch.mean(torch.pow(x, 2))``),
    not ``x * x`` or ``x.square()``, nor a variance call."""
    inner = _reduced(call, ctx) if last_identifier(call.func) == "mean" else None
    if inner is None or _squared(inner, ctx) is None:
        return False
    if isinstance(inner, ast.BinOp):
        return isinstance(inner.op, ast.Pow)
    return isinstance(inner, ast.Call) and last_identifier(inner.func) == "pow"


def _autocast_squares_in_fp32(ctx: Context, call: ast.Call) -> bool:
    """The variance is squared with `pow`, which CUDA autocast runs in fp32 whatever its input (torch's autocast fp32
    list), and the only half precision the code runs in is such an autocast: no model cast to half, here or in the
    project, no autocast on the CPU (whose list leaves `pow` in bf16), and autocast not turned off around the norm.
    The mean of fp32 squares is fp32: the variance the rule is about is not computed in half."""
    if not _squares_by_pow(call, ctx) or ctx.facts.autocast_off_at(call):
        return False
    project = ctx.project
    if ctx.facts.model_casts or project.half_model is not None or project.half is not None or project.cpu_autocast is not None:
        return False
    if ctx.facts.half_autocast is None and project.autocast is None:
        return False
    return cpu_autocast_line(ctx.src.text) is None


def _half_said(ctx: Context, owner: ast.AST | None = None) -> str | None:
    """Where the file or project shows half precision for the norm `owner` (`Facts.half_evidence`), for the message;
    without `owner`, for any code of the file. None where nothing does."""
    evidence = ctx.facts.half_evidence(near=owner)
    if evidence is not None:
        return f"in a file that runs in half precision (line {evidence.lineno})"
    project = ctx.project.half_model or ctx.project.autocast
    return f"in code the project runs as {project.describe()}" if project is not None else None


def _upcast_scopes(ctx: Context) -> set[ast.AST]:
    """Classes (or top-level functions) that cast something to fp32/fp64 or ask for ``dtype=torch.float32``."""
    found: set[ast.AST] = set()
    for call in ctx.src.calls:
        dtypes = ctx.flow.cast_dtype(call) or ctx.flow.dtype_of(keyword(call, "dtype"))
        if dtypes and dtypes <= FLOAT_UP:
            cls = ctx.src.enclosing_class(call)
            found.add(cls or ctx.src.enclosing_function(call) or ctx.src.tree)
    return found

