"""What a code rule sees of one parsed Python file (`Context`), and the recognisers several code rules share:
rotary tables, half-precision casts, angle matmuls, casts of a file's own model. The checks themselves live
with their rules in `ampdoctor/rules/ampNNN_*.py`."""

from __future__ import annotations

import ast
import functools
from typing import Any, Iterator, Mapping

from ampdoctor.core.model import Severity
from ampdoctor.dtypes import ROPE_WORDS
from ampdoctor.lint.python.dataflow import BF16, FP16, HALF, Dataflow
from ampdoctor.lint.python.facts import Facts, ModelCast
from ampdoctor.lint.python.project import Evidence, ProjectContext
from ampdoctor.lint.python.resolve import last_identifier, tokens
from ampdoctor.lint.python.source import SourceFile

# (node, message), or (node, message, severity) where the catalog's severity is not this situation's (None: the
# catalog's), or (node, message, severity, details): what the rule's rewrite (`code_fix`) needs to know of the hit
CodeHit = tuple[ast.AST, str] | tuple[ast.AST, str, Severity | None] | tuple[ast.AST, str, Severity | None, Mapping[str, Any]]


class Context:
    """What a check sees: the parsed file, its dataflow and file facts."""

    def __init__(self, src: SourceFile, project: ProjectContext | None = None) -> None:
        self.src = src
        # The precision the project runs this file's code under; empty for a file linted alone.
        self.project = project if project is not None else ProjectContext()
        self._flow = Dataflow(src)
        self.facts = Facts(src, self._flow, self.project.launch, self.project.runs)

    def under(self, project: ProjectContext | None) -> "Context":
        """The same file under another project context. The file's facts and dataflow read only the context's launch
        lines: where those are the same they are shared, with all they have worked out (a file judged again under
        its project's precision asks the same of them)."""
        other = Context(self.src, project)
        if (other.project.launch, other.project.runs) == (self.project.launch, self.project.runs):
            other._flow, other.facts = self._flow, self.facts
        return other

    @functools.cached_property
    def flow(self) -> Dataflow:
        self.facts.model_casts  # fills flow.half_models, which tensor_dtype reads
        return self._flow

    def qualname(self, node: ast.AST) -> str | None:
        return self.src.imports.qualname(node)

    def half_model_at(self, node: ast.AST) -> Evidence | None:
        """The project's cast of its model to half (`ProjectContext.half_model`) where it reaches `node`: code outside
        the file's classes, or in a class the training file builds its model from, or one such a class names (its
        bases, its layers), and so on; a model class of the file that none of them names is not run by that cast."""
        evidence = self.project.half_model
        if evidence is None or not evidence.classes:
            return evidence
        top = next((a for a in self.src.ancestors(node) if isinstance(a, ast.ClassDef) and self.src.parents.get(a) is self.src.tree), None)
        return evidence if top is None or top.name in self._built_classes else None

    @functools.cached_property
    def _built_classes(self) -> frozenset[str]:
        """The names of the file's top-level classes that the project's model cast reaches (`half_model_at`): the
        classes it builds, and what they name, through module-level functions and tables too (``BLOCKS = {"a":
        BlockA}``, ``def make_block(): ...``)."""
        defined = self.src.top_level
        todo = [n for n in (self.project.half_model.classes if self.project.half_model else ()) if n in defined]
        reached = set(todo)
        while todo:
            for top in defined[todo.pop()]:
                for node in ast.walk(top):
                    if isinstance(node, ast.Name) and node.id in defined and node.id not in reached:
                        reached.add(node.id)
                        todo.append(node.id)
        return frozenset(n for n in reached if any(isinstance(d, ast.ClassDef) for d in defined[n]))


def calls_named(ctx: Context, names: frozenset[str] | set[str]) -> Iterator[tuple[ast.Call, str]]:
    for call in ctx.src.calls:
        name = ctx.qualname(call.func)
        if name in names:
            yield call, name


# Without one of these a file names no half dtype the dataflow could resolve.
HALF_WORDS = ("bfloat16", "float16", ".half()", "torch.half", "bf16\"", "bf16'", "fp16\"", "fp16'")
# Without one of these a file has no rotary table.
ROPE_TRIGGERS = ("cos", "sin", "freq", "rope", "rotary", "Rotary", "cis", "theta")
FLOAT_UP = frozenset({"fp32", "fp64"})
# Kernels that take their tensors in one half dtype and refuse others (flash-attn's attention and `apply_rotary`,
# "Input and cos/sin must have the same dtype", incident 5; vLLM's fork keeps the assert, flash-attn #823). A
# plain-torch rotation or torch's SDPA promotes or autocasts instead of failing.
STRICT_KERNEL_MODULES = ("flash_attn", "vllm", "vllm_flash_attn")
# PEFT's wrap of a model in adapters.
PEFT_FUNCTIONS = frozenset({"peft.get_peft_model", "peft.mapping.get_peft_model", "peft.mapping_func.get_peft_model"})
# Loss scalers by their canonical names (resolve.py maps the module paths they are also imported from).
GRAD_SCALERS = frozenset({"torch.amp.GradScaler", "torch.cuda.amp.GradScaler", "torch.distributed.fsdp.ShardedGradScaler"})

POSITION_TOKENS = frozenset({"pos", "position", "positions", "timestep", "timesteps", "ids"})
NOT_ROPE = frozenset({"sim", "similarity", "loss", "cossim", "dist", "distance", "schedule", "scheduler", "lr"})
POSITION_FACTORIES = frozenset({"torch.arange", "torch.linspace", "torch.range"})
TRIG = frozenset({"torch.cos", "torch.sin", "torch.polar"})
COMBINE = frozenset({"torch.cat", "torch.stack", "torch.outer", "torch.einsum"})
# On autocast's lower-precision lists. einsum is on CUDA's itself (its operands are cast before torch decomposes
# it, whatever it contracts), not on the CPU's: there only the bmm a contraction decomposes into is cast, and an
# einsum that contracts no index is an elementwise mul left in fp32 (`contracts`).
ANGLE_MATMULS = frozenset({"torch.matmul", "torch.mm", "torch.bmm", "torch.einsum"})
# The torch functions whose product autocast computes in its half dtype (attention scores, logits).
MATMUL_CALLS = ANGLE_MATMULS | {"torch.baddbmm"}


def chain_words(expr: ast.AST, ctx: Context, *, calls_too: bool = True) -> frozenset[str]:
    """Identifier tokens along a receiver chain: ``self.freqs.cos().to(x)`` -> {self, freqs, cos, to}.
    Arguments of torch.cat/stack/outer count, since a table built from cos/sin pieces is still a table."""
    words: set[str] = set()
    node = expr
    for _ in range(32):
        if isinstance(node, ast.Name):
            words |= tokens(node.id)
            break
        if isinstance(node, ast.Attribute):
            words |= tokens(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and calls_too:
            name = ctx.qualname(node.func)
            if name in TRIG:
                words.add("cos")
            if name in COMBINE:
                for arg in node.args:
                    for elt in arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]:
                        words |= chain_words(elt, ctx)
                break
            if name is not None:
                break
            node = node.func
        else:
            break
    return frozenset(words)


def is_table(words: frozenset[str]) -> bool:
    return bool(words & ROPE_WORDS) and not words & NOT_ROPE and not words & POSITION_TOKENS - {"ids"}


def half_dtypes_run(ctx: Context, dtypes: frozenset | None = None) -> frozenset:
    """The half dtypes a tensor may be in: its own where the dataflow knows them (`dtypes`), else those the file and
    its project run in (both where neither says)."""
    if dtypes and dtypes & HALF:
        return dtypes & HALF
    seen = set(ctx.project.precisions & HALF)
    if ctx.facts.bf16_evidence is not None:
        seen |= BF16
    if ctx.facts.fp16_possible:
        seen |= FP16
    return frozenset(seen) or HALF


def half_casts(ctx: Context) -> Iterator[tuple[ast.Call, frozenset]]:
    """Calls that cast to, or create in, bf16/fp16 (maybe: ``.to(dtype)`` with dtype bf16 on some path)."""
    for call in ctx.src.calls:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in ("to", "type", "half", "bfloat16")) \
                and not any(kw.arg == "dtype" for kw in call.keywords):
            continue  # no cast method, and a factory without ``dtype=`` makes its tensor in the default dtype
        dtypes = ctx.flow.cast_dtype(call, None)
        if dtypes and dtypes & HALF:
            yield call, dtypes


def assigned_name(ctx: Context, call: ast.Call) -> str | None:
    """The name a value is stored under: an assignment target or a ``register_buffer("name", value)``."""
    parent = ctx.src.parents.get(call)
    child: ast.AST = call
    if isinstance(parent, ast.Tuple):
        grand = ctx.src.parents.get(parent)
        if isinstance(grand, ast.Assign) and len(grand.targets) == 1 and isinstance(grand.targets[0], ast.Tuple):
            target = grand.targets[0]
            if len(target.elts) == len(parent.elts):
                return last_identifier(target.elts[parent.elts.index(child)])
        return None
    if isinstance(parent, (ast.Assign, ast.AnnAssign)):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        return last_identifier(targets[0]) if len(targets) == 1 else None
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and parent.func.attr == "register_buffer":
        if len(parent.args) >= 2 and parent.args[1] is call and isinstance(parent.args[0], ast.Constant):
            return str(parent.args[0].value)
    return None


def parameter_loops(ctx: Context, *, selections: bool = False) -> Iterator[tuple[ast.For, str]]:
    """``for p in model.parameters():`` / ``for name, p in m.named_parameters():``: each loop over a module's
    parameters, with the name its body reads each parameter by; with `selections`, also loops over a selection of
    them (`_parameters_selected`), whose ``iter`` is then no ``.parameters()`` call."""
    for call in ctx.src.calls:  # indexed at parse: no walk of the whole tree
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr not in ("parameters", "named_parameters"):
            continue
        if not selections:
            node = ctx.src.parents.get(call)
            loops = [node] if isinstance(node, ast.For) and node.iter is call else []
            named = func.attr == "named_parameters"
        else:
            value, named = _parameters_selected(ctx, call, func.attr == "named_parameters")
            loops = list(_loops_over(ctx, value))
        for node in loops:
            target = node.target
            if named:
                target = target.elts[1] if isinstance(target, ast.Tuple) and len(target.elts) == 2 else None
            if isinstance(target, ast.Name):
                yield node, target.id


def _parameters_selected(ctx: Context, call: ast.Call, named: bool) -> tuple[ast.AST, bool]:
    """The expression that holds a module's parameters, through a selection of them that keeps each one
    (``filter(lambda p: p.requires_grad, m.parameters())``, ``[p for n, p in m.named_parameters() if ...]``,
    ``list(...)``), and whether its items are still (name, parameter) pairs."""
    value: ast.AST = call
    for _ in range(4):
        parent = ctx.src.parents.get(value)
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in ("filter", "list", "tuple") \
                and parent.args and parent.args[-1] is value:
            value = parent
        elif isinstance(parent, ast.comprehension) and parent.iter is value and not parent.is_async \
                and isinstance(comp := ctx.src.parents.get(parent), (ast.ListComp, ast.GeneratorExp)) and len(comp.generators) == 1:
            target = parent.target.elts[1] if named and isinstance(parent.target, ast.Tuple) and len(parent.target.elts) == 2 \
                else parent.target
            if not (isinstance(comp.elt, ast.Name) and isinstance(target, ast.Name) and comp.elt.id == target.id):
                break
            value, named = comp, False
        else:
            break
    return value, named


def _loops_over(ctx: Context, value: ast.AST) -> Iterator[ast.For]:
    """``for`` loops over `value`: directly, or over the name it is bound to, in the same scope."""
    parent = ctx.src.parents.get(value)
    if isinstance(parent, ast.For) and parent.iter is value:
        yield parent
    elif isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        name, scope = parent.targets[0].id, ctx.src.scope(parent)
        for node in ast.walk(scope):
            if isinstance(node, ast.For) and isinstance(node.iter, ast.Name) and node.iter.id == name and node.lineno > parent.lineno \
                    and ctx.src.scope(node) is scope:
                yield node


def contracts(call: ast.Call) -> bool:
    """Does this einsum sum over an index (``"bij,bjk->bik"``), or may it (a spec we cannot read)? An index that
    is in an operand but not in the output is summed; without ``->`` the output is the indices seen once."""
    spec = call.args[0] if call.args else None
    if not (isinstance(spec, ast.Constant) and isinstance(spec.value, str)):
        return True
    text = spec.value.replace(" ", "").replace("...", "")
    inputs, arrow, output = text.partition("->")
    letters = [c for c in inputs if c.isalpha()]
    if not arrow:
        return any(letters.count(c) > 1 for c in letters)
    return bool(set(letters) - set(output))


def angle_matmuls(ctx: Context, every_einsum: bool = False) -> Iterator[ast.AST]:
    """Matrix products with an inv_freq/freqs operand: ``inv_freq @ position_ids``, ``torch.einsum("bdj,bjn->bnd", inv_freq, pos)``;
    with `every_einsum` (what CUDA's autocast casts), an einsum that contracts no index too (``"i,j->ij"``)."""
    operands: list[tuple[ast.AST, list[ast.AST]]] = [(m, [m.left, m.right]) for m in ctx.src.matmuls]
    for call in ctx.src.calls:
        name = ctx.qualname(call.func)
        if name in ANGLE_MATMULS and (name != "torch.einsum" or every_einsum or contracts(call)):
            operands.append((call, [a for a in call.args if not isinstance(a, ast.Constant)]))
    for node, parts in operands:
        words = [chain_words(p, ctx) for p in parts]
        if any(w & {"freq", "freqs", "inv"} and not w & NOT_ROPE for w in words):
            yield node



def in_class(ctx: Context, node: ast.AST) -> bool:
    """`node` sits in a class body: a model's code, which a model cast or the project's precision reaches."""
    return ctx.src.enclosing_class(node) is not None


def parameter_attributes(ctx: Context, cls: ast.ClassDef) -> set[str]:
    """The attributes of `self` a class binds to ``nn.Parameter(...)``: the module's own weights, fp32 under autocast
    and half when the model is cast."""
    return {a for a, calls in ctx.src.built_in_class(cls).items()
            if any((ctx.qualname(c.func) or "").endswith("Parameter") for c in calls)}


def construction_only(ctx: Context, fn: ast.AST | None) -> bool:
    """`fn` runs only while a module is built: it is the module's ``__init__``, or a method of its class that only
    ``__init__`` calls (``self._build_cache()`` from ``__init__`` and nowhere else). What it computes is made where
    the model is constructed: before the model is cast to half and outside the autocast region its forward passes
    run in. A method the forward calls too (a cache rebuilt for a longer sequence) is not this."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    cls = ctx.src.enclosing_class(fn)
    if cls is None or fn not in cls.body:
        return False
    if fn.name == "__init__":
        return True
    callers = [ctx.src.enclosing_function(c) for c in ctx.flow.calls_of(fn, cls)]
    # every mention of the method a call of it: one passed on or stored may be called from anywhere
    mentioned = [n for n in ctx.src.attributes if n.attr == fn.name and ctx.src.enclosing_class(n) is cls]
    return bool(callers) and len(mentioned) == len(callers) and all(
        isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == "__init__" for f in callers)


def in_half_module(ctx: Context, node: ast.AST) -> ModelCast | None:
    """The local model cast, if `node` sits in a class of the file that casts its own model to half."""
    cast = ctx.facts.local_half_model
    return cast if cast is not None and in_class(ctx, node) else None


# Words only rotary code uses: a cos/sin table in a file without them may be a sinusoidal position or frequency
# table, and messages then say no more than "cos/sin table".
_ROTARY_SAID = ("rotary", "rope", "rotate_half", "apply_rotary", "freqs_cis")


def rotary_said(ctx: Context) -> bool:
    text = ctx.src.text.lower()
    return any(w in text for w in _ROTARY_SAID)


def bf16_in_function(ctx: Context, call: ast.Call) -> ast.AST | None:
    """bf16 named in the function that holds `call` (a ``dtype=torch.bfloat16`` parameter it never passes on): an
    autocast there was meant to run in it, a GradScaler beside it notwithstanding."""
    fn = ctx.src.enclosing_function(call)
    if fn is None:
        return None
    return next((e for e in ctx.facts.bf16_places() if (ctx.src.enclosing_function(e) is fn or e in _defaults(fn))
                 and not ctx.src.exclusive(e, call)), None)  # not the other side of an `if` the call is on


def _defaults(fn: ast.AST) -> list[ast.AST]:
    args = fn.args  # type: ignore[attr-defined]
    return [n for d in (*args.defaults, *args.kw_defaults) if d is not None for n in ast.walk(d)]
