"""AMP002 rope-cache-low-precision: RoPE cos/sin/inv_freq tables are stored or computed in bf16/fp16.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP002`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Phase, Tag
from ampdoctor.core.engine import Places
from ampdoctor.core.model import Location, Severity
from ampdoctor.core.registry import Hit, code_check, policy_check, runtime_check
from ampdoctor.dtypes import EXACT_INT, HALF, ROPE_TABLE_NAME, name_of
from ampdoctor.facts import RunFacts
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
from ampdoctor.lint.python.resolve import tokens
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
        receiver = call.func.value if isinstance(call.func, ast.Attribute) and ctx.qualname(call.func) is None else None
        stored = assigned_name(ctx, call)
        if receiver is not None and is_table(chain_words(receiver, ctx)):
            what = f"`{ast.unparse(receiver)[:60]}`"
        elif stored is not None and is_table(tokens(stored)):
            what = f"`{stored}`"
        else:
            continue
        yield call, f"{table_kind(ctx)} {what} is cast to {describe(dtypes)}; keep cos/sin/inv_freq in float32"


@code_check("AMP002", triggers=("register_buffer",), also=(ROPE_TRIGGERS,), project=True)
def rope_buffer_cast_with_model(ctx: Context) -> Iterator[CodeHit]:
    # `model.half()` / `model.to(torch.bfloat16)` casts every floating buffer, persistent or not: an fp32 `inv_freq`
    # registered in __init__ becomes half, and angles computed from it (`type_as(inv_freq)`, `inv_freq @ pos`) are
    # half too, whatever __init__ wrote.
    cast = _model_cast(ctx)
    if cast is None:
        return
    for cls in ctx.src.classes:
        for name, node in _table_buffers(ctx, cls):
            if not _upcast_where_used(ctx, cls, name):
                yield node, (f"{table_kind(ctx)} buffer `{name}` is cast with the model to {cast}, and what is computed "
                             f"from it runs in that dtype; use `self.{name}.float()` where it is read, or rebuild it after the cast")


def _model_cast(ctx: Context) -> str | None:
    """How this file's modules come to be cast to half: a cast in the file of a model whose class it defines, or a
    training file of the project that casts the model built from its classes."""
    local = next((c for c in ctx.facts.model_casts if c.local_class), None)
    if local is not None:
        return f"{describe(local.dtypes)} (line {local.node.lineno})"
    project = ctx.project.half_model
    return f"{describe(project.dtypes)}: {project.describe()}" if project is not None else None


def _table_buffers(ctx: Context, cls: ast.ClassDef) -> Iterator[tuple[str, ast.Call]]:
    for node in ast.walk(cls):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            name = node.args[0].value
            if is_table(tokens(name)):
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


def table_kind(ctx: Context) -> str:
    return "RoPE table" if rotary_said(ctx) else "cos/sin table"


# Factories of random values: `cos = torch.randn(B, S, D, dtype=torch.bfloat16)` feeds a fused-RoPE kernel test
# arbitrary numbers; no position was ever turned into an angle there. (`torch.empty`/`zeros` stay: a buffer
# allocated in bf16 and filled with cos values later is a bf16 table.)
_RANDOM = frozenset({f"torch.{n}" for n in ("randn", "rand", "randint", "randn_like", "rand_like", "randint_like", "normal", "randperm")})

# Sinusoidal embeddings added to the input (Transformer/diffusion timestep embeddings) use sin and cos too, but are
# no rotary table: casting them is the model's dtype, not a position rotated by the wrong angle.
_ABSOLUTE = frozenset({"sinusoidal", "sinusoid", "absolute", "timestep", "timesteps", "time"})


def _absolute_embedding_scopes(ctx: Context) -> set[ast.AST]:
    """Functions (or the module) of sinusoidal embeddings: named or classed so (and not rotary), or concatenating
    sin and cos side by side as features (`torch.cat([sin, cos], -1)`), which a rotary table never does."""
    out: set[ast.AST] = set()
    for fn in (n for n in ast.walk(ctx.src.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        cls = next((a for a in ctx.src.ancestors(fn) if isinstance(a, ast.ClassDef)), None)
        words = tokens(fn.name) | (tokens(cls.name) if cls else frozenset())
        if words & _ABSOLUTE and not words & {"rotary", "rope"}:
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
    angles = [op.seq for op in t.tagged(Tag.ANGLE) if op.extra[1] > EXACT_INT["bf16"]]
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
    for op in t.ops(Phase.FORWARD):
        if t.op(op.seq) not in _APPLY:
            continue
        for dtype, prod in t.float_inputs(op.seq):
            found = t.half_copy_of(prod) if dtype in ctx.HALF and prod >= 0 else None
            table = found[1] if found is not None else ""
            if not table or not ROPE_TABLE_NAME.search(table) or (-1, table) in seen:
                continue
            seen.add((-1, table))
            yield Hit(f"rotary table {table} is kept in fp32 but cast to {name_of(dtype)} where it is applied ({t.op(op.seq)}): the "
                      "product rounds cos/sin as a half-precision cache would; apply it in fp32 (`q.float() * cos`) and cast the result back",
                      t.location(found[0]), related=(t.location(op.seq, "applied here"),), details={"tensor": table, "dtype": name_of(dtype)})
