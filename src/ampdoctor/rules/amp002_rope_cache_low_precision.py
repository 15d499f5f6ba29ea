"""AMP002 rope-cache-low-precision: RoPE cos/sin/inv_freq tables are stored or computed in bf16/fp16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP002`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from ampdoctor.audit.evidence import Phase, Tag
from ampdoctor.core.engine import Places
from ampdoctor.core.model import Location, Severity
from ampdoctor.core.registry import Hit, code_check, code_fix, policy_check, runtime_check
from ampdoctor.dtypes import EXACT_INT, FP16, HALF, ROPE_TABLE_NAME, describe_half, name_of
from ampdoctor.facts import RunFacts
from ampdoctor.frameworks.base import as_dtype
from ampdoctor.lint.cstedit import dotted as cst_dotted
from ampdoctor.lint.python.context import (
    HALF_WORDS,
    ROPE_TRIGGERS,
    CodeHit,
    Context,
    assigned_name,
    chain_words,
    half_casts,
    is_table,
    rotary_said,
)
from ampdoctor.lint.python.dataflow import describe
from ampdoctor.lint.python.resolve import argument, keyword, last_identifier, names_rotary, self_attribute, tokens
from ampdoctor.policy import Policy

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


@code_check("AMP002", triggers=HALF_WORDS, also=(ROPE_TRIGGERS,))
def rope_cache_low_precision(ctx: Context) -> Iterator[CodeHit]:
    # Incident 2 (modded-nanogpt #39): `self.cos_cached = freqs.cos().bfloat16()`.
    absolute = _absolute_embedding_scopes(ctx)
    for call, dtypes in half_casts(ctx):
        if (ctx.src.enclosing_function(call) or ctx.src.tree) in absolute:
            continue
        if (ctx.qualname(call.func) or "") in _RANDOM:
            continue  # random values named cos/sin are a kernel test's inputs, never a table of angles
        if _constant_filled(ctx, call):
            continue  # zeros or ones (an identity rotation's angles) are exact in any dtype: no table is rounded
        if _cast_to_an_activation_dtype(ctx, call, dtypes):
            continue  # `.to(x.dtype)` at the point of use, however spelled: the audit's business, as the catalog says
        receiver = call.func.value if isinstance(call.func, ast.Attribute) and ctx.qualname(call.func) is None else None
        stored = assigned_name(ctx, call)
        if receiver is not None and is_table(words := chain_words(receiver, ctx)) and not _learned_weight(ctx, receiver):
            what = f"`{ast.unparse(receiver)[:60]}`"
        elif stored is not None and is_table(words := tokens(stored)):
            what = f"`{stored}`"
        elif (table := _table_computed_from(ctx, call)) is not None:
            words = tokens(table)
            said = (f"{table_kind(ctx)} `{table}` is computed from `{ast.unparse(call)[:50]}`, which is {describe_half(dtypes)}: "
                    "the frequencies and angles it is made of keep that precision; build it in float32")
            yield call, said, None, {}
            continue
        else:
            continue
        uncast = {"uncast": call.col_offset} if stored is not None and _dropped_safely(ctx, call) else {}
        yield _cast_table(ctx, call, f"{table_kind(ctx)} {what}", words, dtypes, uncast)


def _cast_table(ctx: Context, call: ast.Call, table: str, words: frozenset, dtypes: frozenset, uncast: dict) -> CodeHit:
    """The finding for a table cast to half: a note for a finished cos/sin table in fp16, or cast to a dtype every
    call passes (`_cast_to_a_passed_dtype`); a warning otherwise."""
    passed = _tensor_dtype_every_call_passes(ctx, call) if words & _FINISHED else None
    if passed is not None:
        return _cast_to_a_passed_dtype(ctx, call, table, dtypes, passed, uncast)
    said = f"{table} is cast to {describe_half(dtypes)}; keep cos/sin/inv_freq in float32"
    if dtypes == {FP16} and words & _FINISHED:
        # fp16 keeps 11 bits: a finished cos/sin table (values in [-1, 1]) is rounded by 2**-12 at most, as much
        # as the fp16 product with q and k that follows rounds anyway. Frequencies and angles are another matter:
        # their error grows with the position that multiplies them.
        return call, (f"{said} (fp16 rounds a cos/sin value by at most 2**-12, the rounding the fp16 product "
                      "with q and k makes anyway; bf16 tables lose 8 times more)"), Severity.INFO, uncast
    return call, said, None, uncast


def _cast_to_a_passed_dtype(ctx: Context, call: ast.Call, table: str, dtypes: frozenset, passed: tuple[str, ast.expr],
                            uncast: dict) -> CodeHit:
    """The finding for a finished table cast to a dtype parameter that every call passes as a tensor's dtype
    (`_tensor_dtype_every_call_passes`): the half dtype is only the parameter's default, which no call leaves it at.
    Half where the project runs this code in half, said with what shows such runs; a note where nothing does."""
    parameter, given = passed
    said = (f"{table} is cast to `{parameter}`, which every call passes as `{ast.unparse(given)[:40]}` "
            f"(line {given.lineno}), not its default {describe_half(dtypes)}")
    runs = _half_runs_shown(ctx)
    if runs is not None:
        return call, f"{said}: {runs}; keep cos/sin in float32", None, uncast
    return call, (f"{said}: half only where that tensor is, and nothing in this project (no autocast or model cast "
                  "that reaches this file, no config that names a half dtype) shows a half run; keep cos/sin in "
                  "float32 for one"), Severity.INFO, uncast


def _half_runs_shown(ctx: Context) -> str | None:
    """What shows that the project runs this file's code in half precision: a half autocast, a model cast or a
    training config that reaches the file, or else a YAML config of the project that writes a half dtype or
    precision (``model: {dtype: bfloat16}``, ``mixed_precision: bf16``), which builds or runs some model in half.
    None where nothing does."""
    project = ctx.project
    reached = next((e for e in (project.autocast, project.half_model, project.half) if e is not None and e.dtypes & HALF), None)
    if reached is not None:
        return f"{describe_half(reached.dtypes & HALF)} where this project runs it so: {reached.describe()}"
    for value in project.config_values.values if project.config_values is not None else ():
        if as_dtype(value.value) in HALF and any(w in value.path[-1].lower() for w in ("dtype", "precision")):
            return f"half in the runs of this project's config that says `{value.path[-1]}: {value.value}` ({value.where})"
    return None


def _tensor_dtype_every_call_passes(ctx: Context, call: ast.Call) -> tuple[str, ast.expr] | None:
    """The cast's dtype is a parameter of its function (``def cos_sin(self, seq_len, device, dtype=torch.bfloat16)``,
    then ``.type(dtype)``), never rebound there, that every call of the function in the file passes as the dtype of a
    tensor (``self.cos_sin(seq_len, q.device, q.dtype)``): the half dtype resolved from its default is what no call
    gets. Returns the parameter and the first value passed; None where a call leaves the default or passes anything
    else, or where no call is seen."""
    found = _dtype_parameter(ctx, call)
    if found is None:
        return None
    fn, name = found
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    owner = ctx.src.parents.get(fn)
    # a call through `self.` or the class passes no `self` for a method; a static method has none to skip
    bound = isinstance(owner, ast.ClassDef) and not any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    position = params.index(name) - bound if name in params else -1
    values = []
    for site in ctx.flow.calls_of(fn, owner):
        if any(isinstance(a, ast.Starred) for a in site.args) or any(k.arg is None for k in site.keywords):
            return None
        value = keyword(site, name) if position < 0 else argument(site, position, name)
        if not (isinstance(value, ast.Attribute) and value.attr == "dtype" and isinstance(value.value, ast.Name)
                and value.value.id not in ("self", "cls", "torch")):
            return None
        values.append(value)
    return (name, values[0]) if values else None


def _dtype_parameter(ctx: Context, call: ast.Call) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, str] | None:
    """The function and the name of the parameter a ``.to(...)``/``.type(...)`` cast takes its dtype from, where it
    is a parameter its function never rebinds; None otherwise."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in ("to", "type"):
        return None
    given = keyword(call, "dtype")
    if given is None:
        given = next((a for a in call.args[:2] if isinstance(a, ast.Name) and ctx.flow.dtype_of(a)), None)
    fn = ctx.src.enclosing_function(call)
    if not isinstance(given, ast.Name) or fn is None or not ctx.src.is_parameter(given) \
            or any(line != fn.lineno for line, _ in ctx.src.bindings(given, fn)):
        return None
    return fn, given.id


def _cast_to_an_activation_dtype(ctx: Context, call: ast.Call, dtypes: frozenset) -> bool:
    """The cast is ``.to(k.dtype)`` spelled with a test: it sits in the body of ``if k.dtype == torch.bfloat16:`` (or
    the ``else`` of ``!=``) and casts to that same dtype, so the table meets the dtype of the tensor it rotates where
    it is used, as ``cos.to(x.dtype)`` does (a cast the catalog leaves to the audit). A cache stored in that dtype
    (``self.cos_cached = ....to(q.dtype)``) is still a half cache: only a value not stored under a table's name is
    such a cast."""
    if (name := assigned_name(ctx, call)) is not None and is_table(tokens(name)):
        return False
    for parent, child in ctx.src.steps(call):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test and _tests_tensor_dtype(ctx, parent, child, dtypes):
            return True
    return False


def _tests_tensor_dtype(ctx: Context, branch: ast.If | ast.IfExp, child: ast.AST, dtypes: frozenset) -> bool:
    """The branch `child` is in is taken only where a tensor's ``.dtype`` is `dtypes`: the body of ``t.dtype == d``
    (or ``is``), the ``else`` of ``t.dtype != d``."""
    test = branch.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    in_body = child in branch.body if isinstance(branch, ast.If) else child is branch.body
    if in_body != isinstance(test.ops[0], (ast.Eq, ast.Is)) or not isinstance(test.ops[0], (ast.Eq, ast.Is, ast.NotEq, ast.IsNot)):
        return False
    for tensor, dtype in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
        # a tensor's dtype: not `self.dtype` (a module's, or a setting the class stores), nor one the file assigns
        if isinstance(tensor, ast.Attribute) and tensor.attr == "dtype" and not (isinstance(tensor.value, ast.Name) and tensor.value.id == "self") \
                and not ctx.src.bindings(tensor, ctx.src.scope(branch)):
            return ctx.flow.dtype_of(dtype, ctx.src.scope(branch)) == dtypes
    return False


# Methods and torch functions whose result keeps the dtype of the one tensor they are given: angles computed in half
# stay half through them on the way to the table (`emb.cos()`, `torch.sin(freqs)`).
_KEEPS_DTYPE = frozenset({"cos", "sin", "exp", "neg", "reciprocal", "unsqueeze", "squeeze", "view", "reshape", "contiguous",
                          "clone", "detach", "cpu", "cuda", "transpose", "permute", "flatten", "expand", "repeat",
                          "repeat_interleave"})
_ONE_TENSOR_TORCH = frozenset({"torch.cos", "torch.sin", "torch.exp", "torch.reciprocal"})


# Constructors that give a parameter its shape only: the values come from an initializer (or training) after it.
_SHAPED_ONLY = frozenset({"torch.Tensor", "torch.FloatTensor", "torch.empty", "torch.zeros", "torch.ones", "torch.randn",
                          "torch.rand"})


def _learned_weight(ctx: Context, receiver: ast.AST) -> bool:
    """The receiver is a weight the model learns, not a table of angles: an attribute (``layer.theta.data``) that
    every assignment in the file binds to ``nn.Parameter`` of a tensor given only its shape (``nn.Parameter(
    torch.Tensor(out_features, in_features))``, a polar parametrization's angle). A table made learnable is
    ``nn.Parameter`` of the computed frequencies, and stays a table."""
    node = receiver.value if isinstance(receiver, ast.Attribute) and receiver.attr == "data" else receiver
    if not isinstance(node, ast.Attribute):
        return False
    bound = [a for a in ctx.src.assigns if isinstance(a, ast.Assign)
             and any(isinstance(t, ast.Attribute) and t.attr == node.attr for t in a.targets)]
    return bool(bound) and all(_shaped_parameter(ctx, a.value) for a in bound)


def _shaped_parameter(ctx: Context, value: ast.AST) -> bool:
    if not (isinstance(value, ast.Call) and (last_identifier(value.func) or "") == "Parameter" and value.args):
        return False
    inner = value.args[0]
    return isinstance(inner, ast.Call) and ctx.qualname(inner.func) in _SHAPED_ONLY


def _table_computed_from(ctx: Context, call: ast.Call) -> str | None:
    """The rotary table a half value ends up in, computed from it by arithmetic with numbers, dtype-keeping methods
    and cos/sin (``inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.bfloat16) / d)``), directly or
    through one local name (``emb = torch.cat((f, f), -1).half()`` and then ``self.cos_cached = emb.cos()``). Any
    other tensor operand on the way may promote it, so the chain stops there."""
    top = _through_dtype_keeping(ctx, call)
    name = _stored_name(ctx, top)
    if name is not None and is_table(tokens(name)):
        return name
    parent = ctx.src.parents.get(top)
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)) or name is None:
        return None
    for read in _reads(ctx, top, parent.targets[0]):
        if read.lineno > parent.lineno:
            end = _through_dtype_keeping(ctx, read)
            found = _stored_name(ctx, end)
            if end is not read and found is not None and is_table(tokens(found)):
                return found
    return None


def _stored_name(ctx: Context, node: ast.AST) -> str | None:
    """The name a value is stored under: `assigned_name` for a call (buffers and unpacking included), the one target
    of its assignment for any other value."""
    if isinstance(node, ast.Call):
        return assigned_name(ctx, node)
    parent = ctx.src.parents.get(node)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.value is node:
        return last_identifier(parent.targets[0])
    return None


def _through_dtype_keeping(ctx: Context, node: ast.AST) -> ast.AST:
    """The outermost expression around `node` that holds its values in its dtype (`_KEEPS_DTYPE`, indexing, arithmetic
    with a number or a plain name that no torch call made, ``torch.cat((x, x))``)."""
    for _ in range(12):
        parent = ctx.src.parents.get(node)
        if isinstance(parent, ast.Subscript) and parent.value is node or isinstance(parent, ast.UnaryOp):
            node = parent
        elif isinstance(parent, ast.BinOp) and _number_like(ctx, parent.right if parent.left is node else parent.left):
            node = parent
        elif (call := _call_keeping_dtype(ctx, node, parent)) is not None:
            node = call
        else:
            return node
    return node


def _call_keeping_dtype(ctx: Context, node: ast.AST, parent: ast.AST | None) -> ast.Call | None:
    """The call around `node` (its parent) whose result keeps `node`'s dtype: a `_KEEPS_DTYPE` method of it, a
    one-tensor torch function of it, ``torch.cat((node, node))``."""
    if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in _KEEPS_DTYPE:
        call = ctx.src.parents.get(parent)
        return call if isinstance(call, ast.Call) and call.func is parent else None
    if isinstance(parent, ast.Call) and ctx.qualname(parent.func) in _ONE_TENSOR_TORCH and parent.args[:1] == [node]:
        return parent
    if isinstance(parent, ast.Tuple) and all(ast.dump(e) == ast.dump(node) for e in parent.elts):
        cat = ctx.src.parents.get(parent)
        return cat if isinstance(cat, ast.Call) and ctx.qualname(cat.func) in ("torch.cat", "torch.stack") else None
    return None


def _number_like(ctx: Context, expr: ast.AST) -> bool:
    """A literal number, or a name or attribute no torch call in its scope binds (a base, a dimension)."""
    if isinstance(expr, ast.UnaryOp):
        expr = expr.operand
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.BinOp):
        return _number_like(ctx, expr.left) and _number_like(ctx, expr.right)
    if not isinstance(expr, (ast.Name, ast.Attribute)) or isinstance(expr, ast.Attribute) and expr.attr in ("dtype", "device"):
        return False
    ident = last_identifier(expr) or ""
    if is_table(tokens(ident)) or ident in ("x", "q", "k", "t", "pos", "positions"):
        return False
    bound = ctx.src.bindings(expr, ctx.src.scope(expr))
    return not any(isinstance(v, ast.Call) and (ctx.qualname(v.func) or "").startswith("torch.") for _, v in bound) \
        and not (isinstance(expr, ast.Attribute) and self_attribute(expr) is not None and not bound and _tensor_attribute(ctx, expr))


def _tensor_attribute(ctx: Context, expr: ast.Attribute) -> bool:
    """An attribute of `self` that the file binds to a tensor or registers as a buffer."""
    return any(a.attr == expr.attr and isinstance(a.ctx, ast.Store) for a in ctx.src.attributes) \
        or f'"{expr.attr}"' in ctx.src.text or f"'{expr.attr}'" in ctx.src.text


# What a consumer may do to a table on the way to its cast without the table's dtype showing: indexing and the
# shape methods (arithmetic would promote an fp32 table over a bf16 operand).
_SHAPE = frozenset({"unsqueeze", "squeeze", "view", "reshape", "contiguous", "clone", "detach", "cpu", "cuda", "transpose",
                    "permute", "flatten", "expand", "expand_as", "narrow", "t", "repeat", "repeat_interleave", "roll", "flip"})
_CASTS = frozenset({"float", "double", "half", "bfloat16", "type_as"})
_HALF_DTYPES = frozenset({"torch.bfloat16", "torch.float16", "torch.half"})


def _dropped_safely(ctx: Context, call: ast.Call) -> bool:
    """Can the half cast go, so that the table is stored in what it is computed in (fp32), with nothing else
    changed? The cast is a method cast of the value stored (``.bfloat16()``, ``.half()``, ``.to(torch.bfloat16)``),
    stored in a local name or an attribute of `self` (a buffer), and every read of that name in the file casts
    the table where it is used (``self.cos_cached[:n].to(x.dtype)``), so each consumer gets the dtype it got."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in ("bfloat16", "half", "to") or call.keywords \
            or len(call.args) != (func.attr == "to"):
        return False
    if func.attr == "to" and ctx.qualname(call.args[0]) not in _HALF_DTYPES:
        return False
    reads = _reads(ctx, call, _stored_in(ctx, call))
    return bool(reads) and all(_cast_where_used(ctx, r) for r in reads)


def _reads(ctx: Context, call: ast.AST, target: ast.AST | str | None) -> list[ast.AST]:
    """Every read of what the value is stored in: `self.<name>` anywhere in the file for a buffer or an attribute
    of `self`, the name in the storing scope (nested functions included) for a local; none for anything else."""
    if isinstance(target, str) or self_attribute(target) is not None:
        name = target if isinstance(target, str) else target.attr
        return [a for a in ctx.src.attributes if a.attr == name and isinstance(a.ctx, ast.Load)]
    if isinstance(target, ast.Name):
        return [n for n in ast.walk(ctx.src.scope(call)) if isinstance(n, ast.Name) and n.id == target.id and isinstance(n.ctx, ast.Load)]
    return []


def _stored_in(ctx: Context, call: ast.Call) -> ast.AST | str | None:
    """The target the cast value is assigned to, or the buffer name it is registered under."""
    parent = ctx.src.parents.get(call)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.value is call:
        return parent.targets[0]
    if isinstance(parent, ast.Tuple) and isinstance(grand := ctx.src.parents.get(parent), ast.Assign) and len(grand.targets) == 1 \
            and isinstance(grand.targets[0], ast.Tuple) and len(grand.targets[0].elts) == len(parent.elts):
        return grand.targets[0].elts[parent.elts.index(call)]
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and parent.func.attr == "register_buffer" \
            and len(parent.args) >= 2 and parent.args[1] is call and isinstance(parent.args[0], ast.Constant):
        return str(parent.args[0].value)
    return None


def _cast_where_used(ctx: Context, read: ast.AST) -> bool:
    """Is this read of the table cast on its way to its consumer (``[:n]``, shape methods and a `.to(device)`
    before it)?"""
    found = _first_method_past_shape(ctx, read)
    return found is not None and (found[0] in _CASTS or found[0] == "to" and _casts_dtype(ctx, found[1]))


def _first_method_past_shape(ctx: Context, read: ast.AST) -> tuple[str, ast.Call] | None:
    """The first method called on a read other than indexing, a shape method or a move to a device (its name and
    call), or None where the read is used otherwise."""
    node = read
    while True:
        parent = ctx.src.parents.get(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            node = parent
            continue
        call = ctx.src.parents.get(parent) if isinstance(parent, ast.Attribute) and parent.value is node else None
        if not (isinstance(call, ast.Call) and call.func is parent):
            return None
        if parent.attr not in _SHAPE and not (parent.attr == "to" and _moves_only(call)):
            return parent.attr, call
        node = call


def _casts_dtype(ctx: Context, call: ast.Call) -> bool:
    """``.to(x.dtype)``, ``.to(torch.float32)``, ``.to(device, dtype)``, ``.to(dtype=...)``."""
    if any(kw.arg == "dtype" for kw in call.keywords):
        return True
    dtype = call.args[1] if len(call.args) >= 2 else call.args[0] if call.args else None
    return dtype is not None and (isinstance(dtype, ast.Attribute) and dtype.attr == "dtype" or ctx.flow.dtype_of(dtype) is not None)


def _moves_only(call: ast.Call) -> bool:
    """``.to(x.device)``, ``.to(device=...)``: a move that keeps the dtype."""
    if len(call.args) > 1 or any(kw.arg not in ("device", "non_blocking", "copy") for kw in call.keywords):
        return False
    arg = call.args[0] if call.args else None
    return arg is None or isinstance(arg, ast.Attribute) and arg.attr == "device" or isinstance(arg, ast.Name) and "device" in tokens(arg.id) \
        or isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.split(":")[0] in ("cuda", "cpu")


@code_fix("AMP002")
def keep_table_fp32(module: Any, lines: Mapping[int, tuple[Mapping[str, Any], ...]]) -> Any:
    """``self.cos_cached = emb.cos().bfloat16()`` -> ``self.cos_cached = emb.cos()`` where the detector found every
    read of the table cast where it is used (`_dropped_safely`; the finding's `uncast` detail, the cast's column):
    the table stays fp32 and each consumer still gets its own dtype. A table read without a cast is left for a
    person: there the cast decides what the consumer computes in."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    class Uncast(cst.CSTTransformer):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def leave_Call(self, original: Any, updated: Any) -> Any:
            start = self.get_metadata(PositionProvider, original).start
            columns = {d.get("uncast") for d in lines.get(start.line, ())}
            func = updated.func
            if start.column not in columns or not isinstance(func, cst.Attribute):
                return updated
            method, args = func.attr.value, updated.args
            if (method in ("bfloat16", "half") and not args) or (method == "to" and len(args) == 1 and cst_dotted(args[0].value) in _HALF_DTYPES):
                return func.value
            return updated

    return MetadataWrapper(module).visit(Uncast())


@code_check("AMP002", triggers=("register_buffer", "Buffer("), also=(ROPE_TRIGGERS,), project=True)
def rope_buffer_cast_with_model(ctx: Context) -> Iterator[CodeHit]:
    # `model.half()` / `model.to(torch.bfloat16)` casts every floating buffer, persistent or not: an fp32 `inv_freq`
    # registered in __init__ becomes half, and angles computed from it (`type_as(inv_freq)`, `inv_freq @ pos`) are
    # half too, whatever __init__ wrote.
    for cls in ctx.src.classes:
        cast = _model_cast(ctx, cls)
        for name, node in _table_buffers(ctx, cls) if cast is not None else ():
            if _upcast_where_used(ctx, cls, name):
                continue
            said = (f"{table_kind(ctx)} buffer `{name}` is cast with the model to {cast}, and what is computed "
                    f"from it runs in that dtype; use `self.{name}.float()` where it is read, or rebuild it after the cast")
            guard = _past_the_cache(ctx, cls, name, node)
            if guard is not None:
                # the angles are rounded only on a path a run within the cached length never takes
                yield node, (f"{said} (only where a sequence outgrows the cached tables: `{ast.unparse(guard.test)[:60]}`, "
                             f"line {guard.lineno})"), Severity.INFO
            elif tokens(name) & _FINISHED and _read_in_activation_dtype(ctx, cls, name):
                # a finished table read back in the activations' dtype: half activations round it there all the same
                yield node, (f"{said} (its reads cast it to the activations' dtype, which in a model cast to half "
                             "rounds it as much: the stored dtype changes nothing there)"), Severity.INFO
            else:
                yield node, said


def _model_cast(ctx: Context, cls: ast.ClassDef) -> str | None:
    """How the modules of this class come to be cast to half: a cast in the file of a model whose class it defines,
    or a training file of the project that casts the model built from it."""
    local = next((c for c in ctx.facts.model_casts if c.local_class), None)
    if local is not None:
        return f"{describe(local.dtypes)} (line {local.node.lineno})"
    project = ctx.half_model_at(cls)
    return f"{describe(project.dtypes)}: {project.describe()}" if project is not None else None


def _table_buffers(ctx: Context, cls: ast.ClassDef) -> Iterator[tuple[str, ast.Call]]:
    """The class's buffers named as rotary tables: ``self.register_buffer("inv_freq", ...)``, or an ``nn.Buffer``
    assigned to an attribute of `self` (torch 2.5's spelling, ``self.cos = nn.Buffer(theta.cos())``), which the
    model's cast converts all the same."""
    for node in ast.walk(cls):
        if not isinstance(node, ast.Call):
            continue
        name = None
        if isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            name = node.args[0].value
        elif ctx.qualname(node.func) == "torch.nn.Buffer":
            target = _stored_in(ctx, node)
            if self_attribute(target) is not None:
                name = target.attr
        if name is not None and is_table(tokens(name)):
            yield name, node


def _upcast_where_used(ctx: Context, cls: ast.ClassDef, name: str) -> bool:
    """The class reads the buffer through an fp32 cast (``self.inv_freq.float()``), or overwrites it after init."""
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and node.attr == name:
            parent = ctx.src.parents.get(node)
            if isinstance(parent, ast.Attribute) and parent.attr in ("float", "double", "to"):
                call = ctx.src.parents.get(parent)
                if isinstance(call, ast.Call) and ((ctx.flow.cast_dtype(call) or frozenset()) & {"fp32", "fp64"}):
                    return True
            if isinstance(node.ctx, ast.Store):
                fn = ctx.src.enclosing_function(node)
                if fn is not None and fn.name != "__init__":
                    return True
    return False


def _reads_after_init(ctx: Context, cls: ast.ClassDef, name: str) -> list[ast.Attribute]:
    """The class's reads of ``self.<name>`` outside ``__init__`` (after a model cast, which comes after init)."""
    return [n for n in ast.walk(cls) if isinstance(n, ast.Attribute) and n.attr == name and isinstance(n.ctx, ast.Load)
            and self_attribute(n) is not None and getattr(ctx.src.enclosing_function(n), "name", "__init__") != "__init__"]


def _cache_guard(ctx: Context, node: ast.AST) -> ast.If | None:
    """The ``if`` around `node` that rebuilds tables past their cached length: its test compares a length with an
    attribute of the module by `>` (``if seq_len > self.max_seq_len_cached:``, ``self.max_len < n``)."""
    for parent in ctx.src.ancestors(node):
        if isinstance(parent, ast.If) and isinstance(parent.test, ast.Compare) and len(parent.test.ops) == 1 \
                and any(node in ast.walk(stmt) for stmt in parent.body):
            op, left, right = parent.test.ops[0], parent.test.left, parent.test.comparators[0]
            bound = right if isinstance(op, (ast.Gt, ast.GtE)) else left if isinstance(op, (ast.Lt, ast.LtE)) else None
            if bound is not None and self_attribute(bound) is not None:
                return parent
    return None


def _past_the_cache(ctx: Context, cls: ast.ClassDef, name: str, node: ast.Call) -> ast.If | None:
    """The buffer is made half only for a rebuild past the cached length: its registration sits in such a branch
    (`_cache_guard`), or every read of it after init does (the inv_freq only a rebuild reads)."""
    guard = _cache_guard(ctx, node)
    if guard is not None:
        return guard
    reads = _reads_after_init(ctx, cls, name)
    guards = [_cache_guard(ctx, r) or _called_past_the_cache(ctx, cls, r) for r in reads]
    return guards[0] if reads and all(g is not None for g in guards) else None


def _called_past_the_cache(ctx: Context, cls: ast.ClassDef, read: ast.AST) -> ast.If | None:
    """The method `read` sits in is a table builder that the class calls, after init, only past the cached length
    (``_set_cos_sin_cache``, called by ``__init__`` and by forward under ``if seq_len > self.max_seq_len_cached``)."""
    fn = ctx.src.enclosing_function(read)
    calls = [n for n in ast.walk(cls) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and fn is not None
             and n.func.attr == fn.name and self_attribute(n.func) is not None
             and getattr(ctx.src.enclosing_function(n), "name", "__init__") != "__init__"]
    guards = [_cache_guard(ctx, c) for c in calls]
    return guards[0] if calls and all(g is not None for g in guards) else None


def _read_in_activation_dtype(ctx: Context, cls: ast.ClassDef, name: str) -> bool:
    """Every read of the buffer after init is cast, through slicing and shape methods, to the dtype of a tensor the
    method is given (``self.cos_cached[:n].to(dtype=x.dtype)``, ``.type_as(q)``)."""
    reads = _reads_after_init(ctx, cls, name)
    return bool(reads) and all(_to_argument_dtype(ctx, r) for r in reads)


def _to_argument_dtype(ctx: Context, read: ast.AST) -> bool:
    found = _first_method_past_shape(ctx, read)
    if found is None or found[0] not in ("to", "type", "type_as"):
        return False
    method, call = found
    target = keyword(call, "dtype") or (call.args[-1] if call.args else None)
    owner = target.value if isinstance(target, ast.Attribute) and target.attr == "dtype" and method != "type_as" else target
    return isinstance(owner, ast.Name) and owner.id != "self" and ctx.src.is_parameter(owner)


@code_check("AMP002", triggers=("register_buffer", "Buffer("), also=(ROPE_TRIGGERS, HALF_WORDS), project=True)
def rotation_input_cast_to_half(ctx: Context) -> Iterator[CodeHit]:
    # modded-nanogpt 2025: `x1, x2 = x.to(dtype=torch.bfloat16).chunk(2, -1)` rotated by cos/sin buffers that the
    # model's `.bfloat16()` made bf16 as well: both operands of every product are bf16, so the whole rotation runs in
    # bf16. The fix casts the input to fp32 instead, so the products run in fp32 and only the result is rounded.
    # Reported at the input's cast, since that is the line that decides the rotation's dtype.
    halved = list(half_casts(ctx))
    for cls in ctx.src.classes:
        cast = _model_cast(ctx, cls)
        tables = {name for name, _ in _table_buffers(ctx, cls) if not _upcast_where_used(ctx, cls, name)} if cast is not None else ()
        if not tables:
            continue
        for call, dtypes in halved:
            fn = ctx.src.enclosing_function(call)
            if fn is None or cls not in ctx.src.ancestors(fn) or not _reads_buffer(fn, tables):
                continue
            func = call.func
            if not isinstance(func, ast.Attribute) or ctx.qualname(func) is not None or is_table(chain_words(func.value, ctx)):
                continue  # a table's own cast is the other detectors' finding
            rotated = _rotated_by_table(ctx, fn, _names_bound_from(ctx, call), tables)
            if rotated is None:
                continue
            product, table = rotated
            yield call, (f"`{ast.unparse(func.value)[:40]}` is cast to {describe_half(dtypes)} and then multiplied by "
                         f"`{ast.unparse(table)[:40]}` (line {product.lineno}), read from the rotary buffers "
                         f"({', '.join(sorted(tables))}) that the model's cast makes {cast}: with both operands half, "
                         "the rotation's products and sums run in half precision; cast the input to float32 here so "
                         "the rotation runs in fp32, and cast its result back")


# Methods that split or reshape a tensor without changing its dtype: `x.to(bf16).chunk(2, -1)` is still bf16.
_SPLITS = _SHAPE | {"chunk", "split", "unbind", "tensor_split", "unflatten"}


def _reads_buffer(fn: ast.AST, tables: set[str]) -> bool:
    return any(_is_buffer_read(n, tables) for n in ast.walk(fn))


def _names_bound_from(ctx: Context, value: ast.AST) -> set[str]:
    """The local names a value is assigned to, through indexing, splits and shape methods
    (``x1, x2 = x.to(torch.bfloat16).chunk(2, dim=-1)`` -> {x1, x2}; ``c, s = self.cos[:n], self.sin[:n]`` -> {c})."""
    node: ast.AST = value
    while (around := _same_values_around(ctx, node)) is not None:
        node = around
    parent = ctx.src.parents.get(node)
    if isinstance(parent, ast.Tuple) and isinstance(grand := ctx.src.parents.get(parent), ast.Assign) \
            and len(grand.targets) == 1 and isinstance(grand.targets[0], ast.Tuple) \
            and len(grand.targets[0].elts) == len(parent.elts):
        target = grand.targets[0].elts[parent.elts.index(node)]
        return {target.id} if isinstance(target, ast.Name) else set()
    if isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1:
        target = parent.targets[0]
        return {e.id for e in (target.elts if isinstance(target, ast.Tuple) else [target]) if isinstance(e, ast.Name)}
    return set()


def _same_values_around(ctx: Context, node: ast.AST) -> ast.AST | None:
    """The expression around `node` that holds its values in its dtype: an index of it, or a split or shape method
    called on it; None for anything else."""
    parent = ctx.src.parents.get(node)
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return parent
    if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in _SPLITS:
        call = ctx.src.parents.get(parent)
        return call if isinstance(call, ast.Call) and call.func is parent else None
    return None


def _rotated_by_table(ctx: Context, fn: ast.AST, names: set[str], tables: set[str]) -> tuple[ast.BinOp, ast.AST] | None:
    """The first product in `fn` of one of `names` and a rotary table: an expression that reads one of the `tables`
    buffers, or a name bound to such a read."""
    if not names:
        return None
    from_buffers = set().union(*(_names_bound_from(ctx, n) for n in ast.walk(fn) if _is_buffer_read(n, tables)))
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for mine, other in ((node.left, node.right), (node.right, node.left)):
                if not (isinstance(mine, ast.Name) and mine.id in names):
                    continue
                if isinstance(other, ast.Name) and other.id in from_buffers or any(_is_buffer_read(n, tables) for n in ast.walk(other)):
                    return node, other
    return None


def _is_buffer_read(node: ast.AST, tables: set[str]) -> bool:
    return self_attribute(node) in tables


def table_kind(ctx: Context) -> str:
    return "RoPE table" if rotary_said(ctx) else "cos/sin table"


# Factories of random values: `cos = torch.randn(B, S, D, dtype=torch.bfloat16)` feeds a fused-RoPE kernel test
# arbitrary numbers; no position was ever turned into an angle there. (`torch.empty`/`zeros` stay: a buffer
# allocated in bf16 and filled with cos values later is a bf16 table.)
# Words of a finished rotation table (cos and sin, or the real and imaginary parts of a complex one), as opposed to
# the frequencies or angles it is computed from.
_FINISHED = frozenset({"cos", "sin", "real", "imag"})
# Factories of a tensor of one constant that every dtype holds exactly.
_CONSTANT = frozenset({f"torch.{n}" for n in ("zeros", "ones", "zeros_like", "ones_like")})


def _constant_filled(ctx: Context, call: ast.Call) -> bool:
    """``theta = torch.zeros(..., dtype=dtype)``: a tensor made of zeros or ones, which its function never writes
    into afterwards (no ``theta[i] = ...``, ``theta += ...``, ``theta.copy_(...)``): not a table of angles being
    built in half, whatever its name."""
    if (ctx.qualname(call.func) or "") not in _CONSTANT:
        return False
    parent = ctx.src.parents.get(call)
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name)):
        return False
    name = parent.targets[0].id
    for node in ast.walk(ctx.src.enclosing_function(call) or ctx.src.tree):
        target = node.value if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) else \
            node.target if isinstance(node, ast.AugAssign) else \
            node.func.value if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_") \
            and not node.func.attr.startswith("_") else None
        if isinstance(target, ast.Name) and target.id == name:
            return False
    return True


_RANDOM = frozenset({f"torch.{n}" for n in ("randn", "rand", "randint", "randn_like", "rand_like", "randint_like", "normal", "randperm")})

# Sinusoidal embeddings added to the input (Transformer/diffusion timestep embeddings) use sin and cos too, but are
# no rotary table: casting them is the model's dtype, not a position rotated by the wrong angle.
_ABSOLUTE = frozenset({"sinusoidal", "sinusoid", "absolute", "timestep", "timesteps", "time"})


def _absolute_embedding_scopes(ctx: Context) -> set[ast.AST]:
    """Functions (or the module) of sinusoidal embeddings: named or classed so (and not rotary), or concatenating
    sin and cos side by side as features (`torch.cat([sin, cos], -1)`), which a rotary table never does."""
    out: set[ast.AST] = set()
    for fn in (n for n in ctx.src.functions if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):  # indexed at parse
        cls = ctx.src.enclosing_class(fn)
        names = (fn.name, cls.name) if cls else (fn.name,)
        if any(tokens(n) & _ABSOLUTE for n in names) and not any(names_rotary(n) for n in names):
            out.add(fn)
    for call in ctx.src.calls:
        if ctx.qualname(call.func) == "torch.cat" and call.args and isinstance(call.args[0], (ast.List, ast.Tuple)):
            parts = [chain_words(e, ctx) for e in call.args[0].elts]
            if any("sin" in w for w in parts) and any("cos" in w for w in parts):
                out.add(ctx.src.enclosing_function(call) or ctx.src.tree)
    return out


@policy_check("AMP002")
def rope_cache_low_precision_config(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # GPT-NeoX's RotaryEmbedding casts its cos/sin cache to the model precision (GPT-NeoX #1003).
    if facts.rotary_table_dtype in HALF:
        positions = facts.max_positions
        limit = EXACT_INT[facts.rotary_table_dtype]
        here = at("rotary_table_dtype")
        # The framework's own code casts the cache; no config key fixes it, so this is a note with the code fix.
        yield Hit(f"{facts.framework or 'the framework'} casts its rotary cos/sin tables to the model precision {facts.rotary_table_dtype}"
                  + (f", inexact beyond ~{limit} of the {positions} positions" if positions and positions > limit else ""),
                  here, severity=Severity.INFO, related=at.others(here, "model_dtype"),
                  fix="No config key keeps them fp32: call `ampdoctor.fix.rope(model)` after building the model, which rebuilds the "
                      "tables exactly in fp32 and keeps them fp32 through casts and checkpoint loads.")


@runtime_check("AMP002")
def half_tables(ctx: RuntimeContext) -> Iterator[Hit]:
    """Rotary buffers and tensor attributes in half precision (`model.to(bf16)` casts `inv_freq`), and cos/sin
    computed in half precision from large angles."""
    t = ctx.trace
    seen: set[tuple[int, str]] = set()
    for scan in t.buffer_scans:
        if scan.dtype not in ctx.HALF or (scan.module, scan.name) in seen or not ROPE_TABLE_NAME.search(scan.name):
            continue
        seen.add((scan.module, scan.name))
        mod = t.module(scan.module)
        full = f"{mod}.{scan.name}" if mod else scan.name
        yield Hit(f"rotary table {full} {list(scan.shape)} is {name_of(scan.dtype)} ({scan.when} the step): positions and angles lose precision; keep it fp32",
                  Location(module=mod, label=scan.name), details={"tensor": full, "dtype": name_of(scan.dtype), "seen": scan.when})
    yield from _cast_when_applied(ctx, seen)
    # cos/sin of angles that autocast's matmul made half are AMP101's: the angles, not a table, are where it went wrong
    autocast = {s for _, trig in ctx.autocast_angles.values() for s in trig}
    angles = [op.seq for op in t.tagged(Tag.ANGLE) if op.extra[1] > EXACT_INT["bf16"] and op.seq not in autocast]
    for _, seqs in ctx.grouped(angles, lambda s: (t.op_at(s).module, t.op(s))).items():
        first = seqs[0]
        top = max(t.op_at(s).extra[1] for s in seqs)
        yield Hit(f"{t.op(first)} computes a rotary table in {name_of(t.op_at(first).in_dtypes[0])} from angles up to {top:g}, beyond exact half precision",
                  t.location(first), details={"max_angle": top})


_APPLY = frozenset({"aten::mul", "aten::addcmul"})


def _cast_when_applied(ctx: RuntimeContext, seen: set[tuple[int, str]]) -> Iterator[Hit]:
    """A rotary table kept in fp32 (a buffer or tensor attribute) but cast to half where it is applied
    (`cos = cache[..., :d].to(q.dtype)`, then `q * cos`): the product rounds the table exactly as a half-precision
    cache would. Casts that feed a matmul are autocast's business (AMP101); only an elementwise product is this."""
    t = ctx.trace
    for op in t.ops_named(_APPLY, Phase.FORWARD):
        for dtype, prod in t.float_inputs(op.seq):
            found = t.half_copy_of(prod) if dtype in ctx.HALF and prod >= 0 else None
            table = found[1] if found is not None else ""
            if not table or not ROPE_TABLE_NAME.search(table) or (-1, table) in seen:
                continue
            seen.add((-1, table))
            yield Hit(f"rotary table {table} is kept in fp32 but cast to {name_of(dtype)} where it is applied ({t.op(op.seq)}): the "
                      "product rounds cos/sin as a half-precision cache would; apply it in fp32 (`q.float() * cos`) and cast the result back",
                      t.location(found[0]), related=(t.location(op.seq, "applied here"),), details={"tensor": table, "dtype": name_of(dtype)})
