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
from ampdoctor.lint.python.resolve import last_identifier, names_rotary

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
        mismatch = next(_mismatches(ctx, call, inputs, tables, scope), None)
        if mismatch is not None:
            yield call, *mismatch


def _is_table_operand(ctx: Context, arg: ast.AST) -> bool:
    return is_table(chain_words(arg, ctx)) or (isinstance(arg, ast.Call) and (last_identifier(arg.func) or "") in ("cos", "sin"))


def _mismatches(ctx: Context, call: ast.Call, inputs: list[ast.AST], tables: list[ast.AST], scope: ast.AST) -> Iterator[tuple[str, Severity]]:
    """Input/table pairs whose dtypes are known to differ (an error: the kernel asserts one dtype), or an input upcast
    to fp32 next to a table this file leaves in another's dtype (the incident: the kernel then sees fp32 and bf16 under
    bf16 training). The latter fails only where the table is half: an error where the tables follow a model known to
    be half (`_tables_follow_half`), a warning that says the condition otherwise."""
    for x in inputs:
        x_dtype = ctx.flow.tensor_dtype(x, scope)
        if not x_dtype or len(x_dtype) != 1:
            continue
        for table in tables:
            t_dtype = ctx.flow.tensor_dtype(table, scope)
            differ = bool(t_dtype) and len(t_dtype) == 1 and t_dtype != x_dtype
            x_text, t_text = ast.unparse(x)[:40], ast.unparse(table)[:40]
            fix = f"cast the tables with `.type_as({x_text})`"
            if differ:
                yield (f"rotary input `{x_text}` is {describe(x_dtype)} but `{t_text}` is {describe(t_dtype)}, and this kernel "
                       f"requires one dtype; {fix}"), Severity.ERROR
            elif x_dtype == FP32 and t_dtype is None and (source := _upcast_here(x, ctx, scope)) is not None:
                half = _tables_follow_half(ctx, call, source, scope)
                if half is not None:
                    yield (f"rotary input `{x_text}` is {describe(x_dtype)} but `{t_text}` is left in the model's dtype, half "
                           f"here ({half}), and this kernel requires one dtype; {fix}"), Severity.ERROR
                else:
                    yield (f"rotary input `{x_text}` is {describe(x_dtype)} but `{t_text}` is left in a dtype this code does not "
                           "decide: where it is half (a model cast to bf16/fp16, the tables following it) this kernel, which "
                           f"requires one dtype, fails; {fix}"), Severity.WARNING


def _tables_follow_half(ctx: Context, call: ast.Call, source: ast.AST, scope: ast.AST) -> str | None:
    """Why the tables, which this code leaves in the dtype they come in, are half where the kernel runs: the code casts
    the kernel's result back to the dtype of the tensor it upcast (``apply_rotary_emb(x.float(), cos, sin).type_as(x)``:
    the input is narrower than fp32, and activations and tables follow the half model), the file casts the model it
    defines to half without autocast, or the project runs this code with the model cast to half. None where nothing
    says so (under autocast the weights, and tables made from them, stay fp32)."""
    if _cast_back(ctx, call, source, scope):
        return f"the result is cast back to `{ast.unparse(source)[:40]}`'s dtype, so the input is narrower than fp32"
    cast = ctx.facts.local_half_model
    if cast is not None:
        return f"the file casts its model to {describe(cast.dtypes)} without autocast, line {cast.node.lineno}"
    project = ctx.half_model_at(call)
    return f"the project runs this model as {project.describe()}" if project is not None else None


def _cast_back(ctx: Context, call: ast.Call, source: ast.AST, scope: ast.AST) -> bool:
    """Is the result of `call` (or the name it is assigned to) cast to the dtype of `source`: ``.type_as(source)``,
    ``.to(source.dtype)`` or ``.to(dtype=source.dtype)``?"""
    holders = [call]
    parent = ctx.src.parents.get(call)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        name = parent.targets[0].id
        holders += [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
    wanted = ast.dump(source)
    return any(_casts_to_dtype_of(ctx, holder, wanted) for holder in holders)


def _casts_to_dtype_of(ctx: Context, holder: ast.AST, wanted: str) -> bool:
    """``holder.type_as(x)`` / ``holder.to(x.dtype)`` / ``holder.to(dtype=x.dtype)``, `x` dumped as `wanted`."""
    cast = ctx.src.parents.get(holder)
    user = ctx.src.parents.get(cast)
    if not (isinstance(cast, ast.Attribute) and cast.value is holder and isinstance(user, ast.Call) and user.func is cast):
        return False
    given = [*user.args, *(kw.value for kw in user.keywords if kw.arg == "dtype")]
    if cast.attr == "type_as":
        return any(ast.dump(a) == wanted for a in given)
    return cast.attr == "to" and any(isinstance(a, ast.Attribute) and a.attr == "dtype" and ast.dump(a.value) == wanted for a in given)


def _upcast_here(x: ast.AST, ctx: Context, scope: ast.AST) -> ast.AST | None:
    """`x` is itself an explicit fp32 cast, or a name assigned one: the code chose fp32 for the input only. The tensor
    cast (``q`` of ``q.float()``), else None."""
    if isinstance(x, ast.Name):
        before = [v for line, v in ctx.src.bindings(x, scope) if line < x.lineno]
        x = before[-1] if before else None
    if isinstance(x, ast.Call) and ctx.flow.cast_dtype(x, scope):
        return x.func.value if isinstance(x.func, ast.Attribute) else x
    return None


def _strict_consumer(ctx: Context, call: ast.Call, strict_locals: set[str]) -> bool:
    name = ctx.qualname(call.func) or ""
    ident = last_identifier(call.func) or ""
    if not names_rotary(ident):
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
    is_trig = [ctx.trace.is_trig(p) for _, p in ins]
    trig = [d for (d, _), yes in zip(ins, is_trig) if yes]
    other = [d for (d, _), yes in zip(ins, is_trig) if not yes]
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
