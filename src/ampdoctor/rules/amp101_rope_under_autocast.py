"""AMP101 rope-under-autocast: RoPE angles (`inv_freq @ position_ids`, cos/sin) are computed under an enabled bf16/fp16 autocast.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP101`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.dtypes import name_of
from ampdoctor.lint.python.context import TRIG, CodeHit, Context, angle_matmuls, construction_only, contracts, rotary_said
from ampdoctor.lint.python.dataflow import HALF, torch_factory
from ampdoctor.lint.python.project import SHIPPED_WORD
from ampdoctor.lint.python.resolve import keyword, last_identifier, method, names_rotary

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


def _rotary_functions(ctx: Context) -> set[ast.AST]:
    """Functions (or the module, for top-level code) that take cos/sin of something, and the methods of classes
    named like a rotary embedding."""
    found: set[ast.AST] = set()
    for call in ctx.src.calls:
        name = ctx.qualname(call.func)
        if name in TRIG if name else isinstance(call.func, ast.Attribute) and call.func.attr in ("cos", "sin"):
            found.add(ctx.src.enclosing_function(call) or ctx.src.tree)
    for cls in ctx.src.classes:
        if names_rotary(cls.name):
            found.update(s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return found


def _runs_under_autocast(ctx: Context) -> tuple[str, bool] | None:
    """What shows this file's code runs under autocast, and whether every autocast it cites is entered on the CPU
    (whose autocast leaves an einsum that contracts no index in fp32; CUDA's casts every einsum)."""
    facts = ctx.facts
    if facts.mixed_precision_on:
        return (f"this file enables autocast or mixed precision (line {facts.mixed_precision_on[0].lineno})",
                all(facts.autocast_device(n) == "cpu" for n in facts.mixed_precision_on))
    if facts.mixed_precision:  # offered by the command line or the environment, off in a run that names no option
        return (f"this file may enable mixed precision: its runs can choose a half mode (line {facts.mixed_precision[0].lineno})",
                all(facts.autocast_device(n) == "cpu" for n in facts.mixed_precision))
    if facts.autocast_disabled:
        return f"this file runs under autocast: it turns it off or to fp32 around other code (line {facts.autocast_disabled[0].lineno})", False
    if ctx.project.autocast is not None:
        return f"this file's code runs under {ctx.project.autocast.describe()}", ctx.project.autocast.device == "cpu"
    if ctx.project.guarded is not None:
        return f"its project's models are written to run under autocast: {ctx.project.guarded.describe()}", False
    if ctx.project.shipped:
        return SHIPPED, False
    return None


# Said of a rotary module an installable package ships where nothing of the package autocasts: its users' training
# runs it under theirs (transformers' Llama, PR #29285, computed its angles so for every user of bf16 autocast).
SHIPPED = "this package ships it, and its users' training runs it under their autocast (nothing in this project does: a note)"


# Methods that keep their receiver's device (dtype casts, views, slices).
_SAME_DEVICE = frozenset({"float", "double", "half", "bfloat16", "reshape", "view", "unsqueeze", "squeeze", "flatten",
                          "repeat_interleave", "repeat", "expand", "contiguous", "clone", "detach", "t"})


# torch's functions that join a sequence of tensors, all of one device.
_JOINS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.stack", "torch.hstack", "torch.vstack"})


def _on_the_cpu(ctx: Context, expr: ast.AST, scope: ast.AST, depth: int = 0) -> bool:
    """`expr` is a tensor made on the CPU in this function: one of torch's factories (`dataflow.FACTORIES`, not a
    ``*_like`` one, which follows its input) given no device (or "cpu"), ``torch.from_numpy``, a dtype cast, view or
    slice of one, arithmetic with one (a CPU tensor of one or more dimensions keeps the result there), a join
    (``torch.cat``) of a sequence with one, or a name that
    every assignment the use may read makes one (`SourceFile.reaching`: a table made on the GPU in one branch and on
    the CPU in the other may be on the GPU). An attribute (a module's buffer moves with the module), a parameter or
    anything else may be on the GPU."""
    if depth > 6:
        return False
    if isinstance(expr, ast.BinOp):
        return _on_the_cpu(ctx, expr.left, scope, depth + 1) or _on_the_cpu(ctx, expr.right, scope, depth + 1)
    if isinstance(expr, ast.Subscript):
        return _on_the_cpu(ctx, expr.value, scope, depth + 1)
    if isinstance(expr, ast.Name):
        # the assignments the use may read (``grid = np.linspace(...)`` then ``grid = torch.from_numpy(grid)``: the
        # second alone)
        made = ctx.src.reaching(expr, scope)
        return bool(made) and all(v is not None and _on_the_cpu(ctx, v, scope, depth + 1) for _, v in made)
    return isinstance(expr, ast.Call) and _made_on_the_cpu(ctx, expr, scope, depth)


def _made_on_the_cpu(ctx: Context, expr: ast.Call, scope: ast.AST, depth: int) -> bool:
    """`_on_the_cpu` for a call."""
    if isinstance(expr.func, ast.Attribute) and expr.func.attr in _SAME_DEVICE and ctx.qualname(expr.func) is None:
        return _on_the_cpu(ctx, expr.func.value, scope, depth + 1)
    name = ctx.qualname(expr.func)
    if name in _JOINS and expr.args and isinstance(expr.args[0], (ast.List, ast.Tuple)):
        # torch joins tensors of one device only: one made on the CPU puts the result there
        return any(_on_the_cpu(ctx, e, scope, depth + 1) for e in expr.args[0].elts)
    made = torch_factory(name)
    if name != "torch.from_numpy" and (made is None or made.endswith("_like")):
        return False
    device = keyword(expr, "device")
    return device is None or isinstance(device, ast.Constant) and device.value == "cpu"


def _cast_by_cuda_autocast(ctx: Context, node: ast.AST) -> bool:
    """An einsum that contracts no index is cast by CUDA's autocast only where its operands are on the GPU: not
    where one is a tensor this function made on the CPU (a table precomputed there and moved later)."""
    scope = ctx.src.enclosing_function(node) or ctx.src.tree
    return not any(_on_the_cpu(ctx, a, scope) for a in node.args[1:]) if isinstance(node, ast.Call) else True


@code_check("AMP101", triggers=("freq",), also=(("@", "matmul", "mm(", "einsum"), ("autocast", "mixed_precision", "precision=", "bf16=", "fp16=",
                                                                                 SHIPPED_WORD)), project=True)
def rope_under_autocast(ctx: Context) -> Iterator[CodeHit]:
    # transformers PR #29285, diffusers PR #13922. Autocast's lower-precision list has matmul/mm/bmm and, on
    # CUDA, einsum whatever it contracts: `.float()` on both operands does not help, the product is still bf16. An
    # elementwise product (`pos[..., None] * inv_freq`, `torch.outer`) is not on the list and stays fp32.
    # A model file that never mentions autocast is reported where the project runs it under autocast (a training
    # file's, a config's, another module's guard) and, as a note, where an installable package ships it to users.
    shown = _runs_under_autocast(ctx)
    if shown is None:
        return
    evidence, on_cpu = shown
    rotary = None
    for node in angle_matmuls(ctx, every_einsum=not on_cpu):
        if rotary is None:
            rotary = _rotary_functions(ctx)
        fn = ctx.src.enclosing_function(node)
        if (fn or ctx.src.tree) not in rotary or ctx.facts.autocast_off_at(node) or construction_only(ctx, fn):
            continue
        kind = "RoPE angles" if _rotary_at(ctx, node) else "angles for a cos/sin table"
        outer = isinstance(node, ast.Call) and ctx.qualname(node.func) == "torch.einsum" and not contracts(node)
        if outer and not _cast_by_cuda_autocast(ctx, node):
            continue
        what = ("an einsum, which CUDA's autocast runs in bf16/fp16 even on fp32 operands and whatever it contracts" if outer
                else "a matmul, which autocast runs in bf16/fp16 even on fp32 operands")
        said = (f"{kind} `{ast.unparse(node)[:60]}` are {what}; {evidence}. "
                "Compute them inside `torch.autocast(device_type, enabled=False)`")
        cast = _cast_after(ctx, node)
        if cast is not None:
            # the fix alone would change nothing: the cast that follows rounds the angles as much where it is to half
            said += (f", and drop the cast that follows, `{ast.unparse(cast)[-60:]}`, which rounds the angles as much "
                     "where that dtype is half: keep them fp32 and cast cos/sin instead")
        longer = _rebuilt_for_longer(ctx, node, fn)
        if longer is not None:
            yield node, (f"{said}. A note: the table is built with the model, outside autocast, and the forward builds it "
                         f"again only under `{ast.unparse(longer.test)[:60]}` (line {longer.lineno}), for a sequence longer "
                         "than it was built for"), Severity.INFO
        else:
            yield (node, said, Severity.INFO) if evidence is SHIPPED else (node, said)


def _cast_after(ctx: Context, node: ast.AST) -> ast.Call | None:
    """The cast applied to the angles straight away (``torch.einsum("i,j->ij", t, inv_freq).to(dtype)``,
    ``.type_as(x)``, ``.half()``) to a dtype that may be half: one named by a dtype (``dtype``, ``x.dtype``), a tensor
    it takes the dtype of, or half itself; None for none, for a move to a device, and for a cast to fp32."""
    attr = ctx.src.parents.get(node)
    call = ctx.src.parents.get(attr)
    if not (isinstance(attr, ast.Attribute) and attr.value is node and isinstance(call, ast.Call) and call.func is attr):
        return None
    if attr.attr in ("half", "bfloat16", "type_as"):
        return call
    if attr.attr not in ("to", "type"):
        return None
    known = ctx.flow.cast_dtype(call, ctx.src.scope(node))
    if known:
        return call if known & HALF else None
    named = [keyword(call, "dtype"), *call.args[:2]]
    return call if any(a is not None and "dtype" in (last_identifier(a) or "").lower() for a in named) else None


def _rebuilt_for_longer(ctx: Context, node: ast.AST, fn: ast.AST | None) -> ast.If | None:
    """The comparison under which the forward rebuilds a table that the constructor builds: the angles `node` lie
    in an ``if`` over a comparison (``if seq_len > self.max_seq_len_cached:``) that stores a table the class's
    ``__init__`` stores computed too (not None: a table built lazily is built under the first forward's autocast);
    or `fn` is a method that an ``__init__`` of the file calls (``self._set_cos_sin_cache(max_position_embeddings,
    ...)``, a subclass's override too) and that every other method calls only inside such an ``if``. That ``if``;
    None otherwise."""
    cls = ctx.src.enclosing_class(node)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or cls is None:
        return None
    guard = _comparison_around(ctx, node)
    init = method(cls, "__init__")
    if guard is not None and init is not None and _tables_stored(guard) & _tables_stored(init):
        return guard
    return _called_for_longer(ctx, fn)


def _called_for_longer(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.If | None:
    """The ``if`` over a comparison that holds every call of the method `fn` outside an ``__init__`` of its class's
    family in the file, where such an ``__init__`` calls it too; None otherwise."""
    family = _family(ctx, ctx.src.enclosing_class(fn))
    calls = [c for c in ctx.src.calls if isinstance(c.func, ast.Attribute) and c.func.attr == fn.name
             and isinstance(c.func.value, ast.Name) and c.func.value.id == "self"
             and getattr(ctx.src.enclosing_class(c), "name", None) in family]
    callers = [(c, ctx.src.enclosing_function(c)) for c in calls]
    if not any(f is not None and f.name == "__init__" for _, f in callers):
        return None
    guards = [_comparison_around(ctx, c) for c, f in callers if f is not None and f.name != "__init__"]
    return guards[0] if guards and all(g is not None for g in guards) else None


def _family(ctx: Context, cls: ast.ClassDef | None) -> set[str]:
    """The names of the classes of the file that `cls` derives from or that derive from it, `cls`'s own included:
    those whose ``self.<method>(...)`` may run its method (a subclass calls the base's ``__init__``, which calls the
    subclass's override). A same-named method of an unrelated class is another method."""
    if cls is None:
        return set()
    bases = {c.name: {last_identifier(b) for b in c.bases} for c in ctx.src.classes}
    family, grown = {cls.name}, True
    while grown:
        more = {name for name, above in bases.items() if above & family} | {b for name in family for b in bases.get(name, ())
                                                                           if b in bases}
        grown = not more <= family
        family |= more
    return family


def _tables_stored(block: ast.AST) -> set[str]:
    """The attributes `block` stores a value in (``self.x = ...``, ``self.register_buffer("x", ...)``), None not
    counted."""
    out: set[str] = set()
    for n in ast.walk(block):
        if isinstance(n, ast.Assign) and not (isinstance(n.value, ast.Constant) and n.value.value is None):
            out.update(t.attr for t in n.targets if isinstance(t, ast.Attribute))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "register_buffer" and len(n.args) >= 2 \
                and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str) \
                and not (isinstance(n.args[1], ast.Constant) and n.args[1].value is None):
            out.add(n.args[0].value)
    return out


def _comparison_around(ctx: Context, node: ast.AST) -> ast.If | None:
    """The nearest ``if`` of `node`'s function whose body holds it and whose test is a comparison."""
    for parent, child in ctx.src.steps(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return None
        if isinstance(parent, ast.If) and child in parent.body:
            return parent if isinstance(parent.test, ast.Compare) else None
    return None


def _rotary_at(ctx: Context, node: ast.AST) -> bool:
    """The angles are a rotary embedding's: their class or function is named so, or, outside any class, the file
    speaks of rotary embeddings. A sinusoidal embedding's class beside a rotary one in the file is not."""
    cls, fn = ctx.src.enclosing_class(node), ctx.src.enclosing_function(node)
    if any(names_rotary(d.name) for d in (cls, fn) if d is not None):
        return True
    return cls is None and rotary_said(ctx)


@runtime_check("AMP101")
def angles_under_autocast(ctx: RuntimeContext) -> Iterator[Hit]:
    """What the ops show: a matmul that autocast ran in bf16/fp16 on positions it cast from fp32 (integer values
    from an arange or an integer tensor), whose product reaches a cos/sin (`RuntimeContext.autocast_angles`)."""
    t = ctx.trace
    for mm, (cast, trig) in ctx.autocast_angles.items():
        dt = name_of(t.out_dtype(mm))
        top = max((t.op_at(s).extra[1] for s in trig if t.op_at(s).extra), default=None)
        yield Hit(f"{t.op(mm)} computes rotary angles in {dt} under autocast: autocast cast the fp32 positions to {dt} "
                  f"({t.op(cast)}), so the angles" + (f" (up to {top:g})" if top is not None else "")
                  + f" are {dt} when {t.op(trig[0])} takes them; compute them inside `torch.autocast(device_type, enabled=False)`",
                  t.location(mm), related=(t.location(trig[0], "cos/sin of them"),), details={"dtype": dt, "max_angle": top})
