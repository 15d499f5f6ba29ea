"""AMP003 grad-dtype-mismatch: A parameter's `.grad` is held in a different dtype than the parameter, so the next backward cannot accumulate into it.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP003`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, Iterator

from ampdoctor.audit.fields import EXTRA, IN_DT, IN_PROD, OPTIMIZER, OUT_DT, PHASE
from ampdoctor.audit.names import dtypes_text
from ampdoctor.dtypes import WIDE, name_of
from ampdoctor.facts import RunFacts
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.dataflow import describe
from ampdoctor.lint.python.resolve import dotted
from ampdoctor.policy import Policy
from ampdoctor.rules.engine import Places
from ampdoctor.rules.model import Location, Severity
from ampdoctor.rules.registry import Hit, code_check, policy_check, runtime_check

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


def _grad_owner(expr: ast.AST) -> str | None:
    """``p.grad`` / ``p.grad.data`` -> ``p``."""
    if isinstance(expr, ast.Attribute) and expr.attr == "data":
        expr = expr.value
    if isinstance(expr, ast.Attribute) and expr.attr == "grad":
        return dotted(expr.value) or ast.unparse(expr.value)
    return None


@code_check("AMP003", triggers=(".grad =", ".grad=", ".grad.data =", ".grad.data="), also=((".to(", ".type(", "float()", "half()", "bfloat16()", "double()"),))
def grad_dtype_mismatch(ctx: Context) -> Iterator[CodeHit]:
    # Incident 3 (SimpleTuner #854): `param.grad.data = param.grad.data.to(torch.float32)` on a bf16 model,
    # then the next micro-batch's backward cannot accumulate a bf16 grad into the fp32 `.grad`.
    for node in ctx.src.assigns:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.value, ast.Call):
            continue
        owner = _grad_owner(node.targets[0])
        if owner is None:
            continue
        value = node.value
        dtypes = ctx.flow.cast_dtype(value)
        if not dtypes or not isinstance(value.func, ast.Attribute):
            continue
        source = value.func.value
        while isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and source.func.attr in ("detach", "clone", "contiguous"):
            source = source.func.value
        if _grad_owner(source) != owner:
            continue  # writing a cast copy into another tensor's .grad (fp32 master weights) is the fix, not the bug
        if dtypes <= WIDE and ctx.facts.half_evidence is None:
            continue  # an fp32 model's grads retyped to fp32: nothing in this file trains in half precision
        in_loop = any(isinstance(a, (ast.For, ast.While)) for a in ctx.src.ancestors(node))
        yield node.targets[0], (f"`{ast.unparse(node.targets[0])}` is retyped to {describe(dtypes)}; the parameter keeps its own dtype, so "
                                f"the next backward{' in this loop' if in_loop else ''} cannot accumulate into it")


@policy_check("AMP003")
def grad_dtype_mismatch_policy(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # Incident 3: .grad retyped to another dtype than the parameter's fails at the next accumulation.
    if policy is None or policy.grads == policy.params or facts.trains is False:
        return
    steps = facts.grad_accum_steps
    here = at("grads")
    head = f".grad is kept in {policy.grads} for {policy.params} weights"
    if steps is not None and steps > 1:
        yield Hit(f"{head} with gradient accumulation ({steps} steps): the next micro-batch's backward accumulates a {policy.params} "
                  "gradient into it and fails ('Expected BFloat16, got Float', incident 3)", here, related=at.others(here, "params", "grad_accum_steps"))
    elif steps is None:
        yield Hit(f"{head}: autograd accumulates .grad in the parameter's dtype, so the first accumulation over micro-batches fails "
                  "('Expected BFloat16, got Float', incident 3); use grad_accum for a wider accumulation buffer",
                  here, severity=Severity.WARNING, related=at.others(here, "params"))


@runtime_check("AMP003")
def grads_of_another_dtype(ctx: RuntimeContext) -> Iterator[Hit]:
    """Parameters whose `.grad` has another dtype than they do, seen at a micro-batch boundary or at the optimizer
    step, or a backward that accumulated two dtypes into one `.grad` (incident 3, also where torch does not raise)."""
    t = ctx.trace
    bad: dict[int, tuple] = {}
    for when, passes, pid, gdt, pdt in t.rec.grad_events:
        if pdt is not None and gdt != pdt and pid not in bad:
            bad[pid] = (when, passes, gdt, pdt)
    accum = _mixed_accumulations(ctx)
    pids = list(dict.fromkeys(list(bad) + list(accum)))
    if not pids:
        return
    names = [t.param_name(p) for p in pids]
    if pids[0] in bad:
        when, _, gdt, pdt = bad[pids[0]]
    else:
        dts = t.records[accum[pids[0]][0]][IN_DT]
        pdt, gdt, when = dts[0], next(d for d in dts if d != dts[0]), "backward"
    acc_text = ""
    if accum:
        s = next(iter(accum.values()))[0]
        acc_text = f"; backward then accumulated {dtypes_text(sorted(set(t.records[s][IN_DT]), key=str))} gradients into it"
    cast = _grad_cast(ctx, gdt)
    yield Hit(f"{len(names)} parameter(s) hold a {name_of(gdt)} .grad for a {name_of(pdt)} parameter ({when}){acc_text}: "
              f"{', '.join(names[:4])}{' ...' if len(names) > 4 else ''}",
              cast or Location(module=names[0].rpartition(".")[0], label=names[0].rpartition(".")[2], phase=OPTIMIZER),
              related=tuple(Location(module=n.rpartition(".")[0], label=n.rpartition(".")[2]) for n in names[:4]) if cast else (),
              details={"params": names, "grad": name_of(gdt), "param": name_of(pdt), "accumulated": bool(accum)})


def _mixed_accumulations(ctx: RuntimeContext) -> dict[int, list[int]]:
    """param id -> AccumulateGrad ops that summed two dtypes into its .grad. Only the sums: hooks that run on the
    AccumulateGrad node do other work there (DDP's bf16 compression hook casts the bucket and copies the reduced bf16
    values back into fp32 gradients, which is no accumulation)."""
    out: dict[int, list[int]] = {}
    for r in ctx.trace.records:
        ex = r[EXTRA]
        if ex and ex[0] == "accumulate" and ctx.trace.op(r[0]).startswith("aten::add") and len({d for d, p in zip(r[IN_DT], r[IN_PROD]) if p is not None}) > 1:
            out.setdefault(ex[1], []).append(r[0])
    return out


def _grad_cast(ctx: RuntimeContext, dtype: Any) -> Location | None:
    """The user's own cast of a gradient (incident 3: `param.grad.data = param.grad.data.to(fp32)`)."""
    t = ctx.trace
    for r in t.records:
        if r[PHASE] == OPTIMIZER and t.op(r[0]) == "aten::_to_copy" and r[OUT_DT] and r[OUT_DT][0] == dtype and r[IN_DT][0] != dtype:
            return t.location(r[0], "a .grad is cast here")
    return None
