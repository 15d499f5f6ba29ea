"""AMP005 rope-dtype-mismatch: A rotary kernel receives the input and its cos/sin tables in different dtypes.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP005`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Op, Phase
from ampdoctor.audit.names import module_label
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.dtypes import name_of
from ampdoctor.lint.python.context import STRICT_KERNEL_MODULES, CodeHit, Context, chain_words, is_table
from ampdoctor.lint.python.dataflow import FP32, describe
from ampdoctor.lint.python.resolve import last_identifier, tokens

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


@code_check("AMP005", triggers=("rotary", "rope", "Rotary", "RoPE"),
            also=(("float()", "float32", "torch.float", "double()", "bfloat16", "float16", ".half()"),
                  ("assert", "flash_attn", "vllm"), ("dtype", "flash_attn", "vllm")))  # a strict kernel or a dtype assert
def rope_dtype_mismatch(ctx: Context) -> Iterator[CodeHit]:
    # Incident 5 (transformers #38451): `apply_rotary_emb(tensor.float(), cos, sin)` with bf16 cos/sin.
    strict = _strict_local_functions(ctx)
    for call in ctx.src.calls:
        if not _strict_consumer(ctx, call, strict):
            continue
        scope = ctx.src.scope(call)
        args = [*call.args, *(kw.value for kw in call.keywords if kw.arg)]
        tables = [a for a in args if _is_table_operand(ctx, a)]
        inputs = [a for a in args if a not in tables and isinstance(a, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))]
        mismatch = next(_mismatches(ctx, inputs, tables, scope), None)
        if mismatch is not None:
            yield call, mismatch


def _is_table_operand(ctx: Context, arg: ast.AST) -> bool:
    return is_table(chain_words(arg, ctx)) or (isinstance(arg, ast.Call) and (last_identifier(arg.func) or "") in ("cos", "sin"))


def _mismatches(ctx: Context, inputs: list[ast.AST], tables: list[ast.AST], scope: ast.AST) -> Iterator[str]:
    """Input/table pairs whose dtypes are known to differ, or an input upcast to fp32 next to a table left in the
    model's dtype (the incident: the kernel then sees fp32 and bf16 under bf16 training)."""
    for x in inputs:
        x_dtype = ctx.flow.tensor_dtype(x, scope)
        if not x_dtype or len(x_dtype) != 1:
            continue
        for table in tables:
            t_dtype = ctx.flow.tensor_dtype(table, scope)
            differ = bool(t_dtype) and len(t_dtype) == 1 and t_dtype != x_dtype
            upcast_alone = x_dtype == FP32 and t_dtype is None and _upcast_here(x, ctx, scope)
            if differ or upcast_alone:
                t_text = describe(t_dtype) if t_dtype else "left in the model's dtype (bf16 under bf16 training)"
                yield (f"rotary input `{ast.unparse(x)[:40]}` is {describe(x_dtype)} but `{ast.unparse(table)[:40]}` is {t_text}, and "
                       f"this kernel requires one dtype; cast the tables with `.type_as({ast.unparse(x)[:40]})`")


def _upcast_here(x: ast.AST, ctx: Context, scope: ast.AST) -> bool:
    """`x` is itself an explicit fp32 cast, or a name assigned one: the code chose fp32 for the input only."""
    if isinstance(x, ast.Call):
        return bool(ctx.flow.cast_dtype(x, scope))
    if isinstance(x, ast.Name):
        before = [v for line, v in ctx.src.bindings(x, scope) if line < x.lineno]
        return bool(before) and isinstance(before[-1], ast.Call) and bool(ctx.flow.cast_dtype(before[-1], scope))
    return False


def _strict_consumer(ctx: Context, call: ast.Call, strict_locals: set[str]) -> bool:
    name = ctx.qualname(call.func) or ""
    ident = last_identifier(call.func) or ""
    if not tokens(ident) & {"rotary", "rope"}:
        return False
    if name.split(".")[0] in STRICT_KERNEL_MODULES:
        return True
    return isinstance(call.func, ast.Name) and call.func.id in strict_locals


def _strict_local_functions(ctx: Context) -> set[str]:
    """Functions of this file that assert their operands' dtypes are equal, or call a strict kernel (found once each,
    then every function around them named: no walk per function)."""
    strict: list[ast.AST] = []
    if "assert" in ctx.src.text:
        strict += [n for n in ctx.src.asserts if _compares_dtypes(n.test)]
    if any(m in ctx.src.text for m in STRICT_KERNEL_MODULES):
        strict += [c for c in ctx.src.calls if (ctx.qualname(c.func) or "").split(".")[0] in STRICT_KERNEL_MODULES]
    return {f.name for node in strict for f in ctx.src.ancestors(node) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _compares_dtypes(test: ast.AST) -> bool:
    return (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and all(isinstance(side, ast.Attribute) and side.attr == "dtype" for side in (test.left, test.comparators[0])))


def _table_meets_other(ctx: RuntimeContext, op: Op) -> bool:
    """A cos/sin table and a non-table input of different dtypes, not a promotion autocast undoes (an fp32 table
    against bf16 q/k under autocast is one; a half table against a wide input is not)."""
    if ctx.trace.dtype_kinds(op.seq) < 2:
        return False
    ins = ctx.trace.float_inputs(op.seq)
    if len({d for d, _ in ins}) < 2:
        return False
    trig = [d for d, p in ins if ctx.trace.is_trig(p)]
    other = [d for d, p in ins if not ctx.trace.is_trig(p)]
    if not trig or not other or set(trig) == set(other):
        return False
    return not op.autocast or (any(d in ctx.HALF for d in trig) and any(d not in ctx.HALF for d in other))


@runtime_check("AMP005")
def table_meets_other_dtype(ctx: RuntimeContext) -> Iterator[Hit]:
    """An op applies a cos/sin table to an input of another dtype. Under autocast an fp32 table against bf16 q/k
    is a promotion autocast undoes; a half table against a wide input is not."""
    t = ctx.trace
    hits = [op.seq for op in t.mixed(Phase.FORWARD) if op.out_dtypes is not None and _table_meets_other(ctx, op)]
    for _, seqs in ctx.grouped(hits, lambda s: (t.op_at(s).module, t.op(s))).items():
        first = seqs[0]
        ins = t.float_inputs(first)
        x = next((d, p) for d, p in ins if not t.is_trig(p))
        c = next((d, p) for d, p in ins if t.is_trig(p))
        yield Hit(f"{t.op(first)} applies a {name_of(c[0])} cos/sin table ({t.describe(c[1], c[0])}) to a {name_of(x[0])} input "
                  f"({t.describe(x[1], x[0])}); the result is {name_of(t.out_dtype(first))}",
                  t.location(first), origin=ctx.operand_location(c[1], c[0]), severity=Severity.WARNING,
                  details={"calls": len(seqs), "x": name_of(x[0]), "table": name_of(c[0])})


@runtime_check("AMP005")
def failing_rotary(ctx: RuntimeContext) -> Iterator[Hit]:
    """The failure is a table and an input of different dtypes meeting (incident 5's assert, incident 1's bmm):
    the chain back to where the table (or the input) got its dtype."""
    site = ctx.failure
    if site is None or not ctx.failure_is_rotary() or not ctx.failure_is_dtype_mismatch():
        return
    t = ctx.trace
    tdt, tp = next((d, p) for d, p in site.inputs if t.is_trig(p))
    xdt, xp = next((d, p) for d, p in site.inputs if not t.is_trig(p))
    related = [ctx.operand_location(xp, xdt, f"{name_of(xdt)} input made here")]
    if tdt in ctx.HALF:
        origin_seq, operands = t.table_origin(tp)
        why = f"the cos/sin table is {name_of(tdt)} while the input is {name_of(xdt)}; the table was made in {name_of(tdt)}"
    else:
        origin_seq, operands = t.divergence([xp], xdt, tdt)
        why = f"the input is {name_of(xdt)} while the cos/sin table is {name_of(tdt)}"
    origin = t.location(origin_seq, "origin") if origin_seq is not None else ctx.operand_location(tp, tdt)
    related += [ctx.operand_location(p, d) for p, d in operands]
    if tp >= 0:
        related.append(t.location(t.source(tp), "cos/sin table made here"))
    yield Hit(f"{site.head}: {why} (origin {origin.op} in {module_label(origin.module)})", site.where, origin=origin,
              related=tuple(related), severity=Severity.ERROR, details={"input": name_of(xdt), "table": name_of(tdt)})
