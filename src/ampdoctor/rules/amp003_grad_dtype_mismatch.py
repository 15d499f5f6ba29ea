"""AMP003 grad-dtype-mismatch: A parameter's `.grad` is held in a different dtype than the parameter, which the step of Adam-family and fused optimizers cannot take.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP003`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, Iterator

from ampdoctor.audit.evidence import Phase, Tag
from ampdoctor.audit.names import dtypes_text
from ampdoctor.core.engine import Places
from ampdoctor.core.model import Location, Severity
from ampdoctor.core.registry import Hit, code_check, policy_check, runtime_check
from ampdoctor.dtypes import WIDE, name_of
from ampdoctor.facts import RunFacts
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.dataflow import HALF, describe
from ampdoctor.lint.python.optimizers import named_step_fails, steps_over
from ampdoctor.lint.python.resolve import dotted, keyword, self_attribute
from ampdoctor.policy import Policy

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


def _grad_owner(expr: ast.AST) -> str | None:
    """``p.grad`` / ``p.grad.data`` -> ``p``."""
    if isinstance(expr, ast.Attribute) and expr.attr == "data":
        expr = expr.value
    if isinstance(expr, ast.Attribute) and expr.attr == "grad":
        return dotted(expr.value) or ast.unparse(expr.value)
    return None


def _params_made_half(ctx: Context, node: ast.AST, owner: str) -> bool:
    """Does this file make the retyped parameters bf16/fp16: the retype sits under a test that the parameter is half
    (``if p.dtype == torch.bfloat16``), or the file casts a model to a half dtype it chooses itself."""
    for parent in ctx.src.ancestors(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            break
        if isinstance(parent, (ast.If, ast.While)) and _tests_half_dtype(ctx, parent.test, owner):
            return True
    return any(_half_chosen_here(ctx, _cast_dtype_expr(ctx, cast.node)) for cast in ctx.facts.model_casts)


def _tests_half_dtype(ctx: Context, test: ast.AST, owner: str) -> bool:
    for cmp in (n for n in ast.walk(test) if isinstance(n, ast.Compare) and len(n.ops) == 1):
        if not isinstance(cmp.ops[0], (ast.Eq, ast.Is, ast.In)):
            continue
        sides = [cmp.left, cmp.comparators[0]]
        if any(isinstance(x, ast.Attribute) and x.attr == "dtype" and dotted(x.value) == owner for x in sides):
            other = sides[1] if isinstance(sides[0], ast.Attribute) and sides[0].attr == "dtype" else sides[0]
            elts = other.elts if isinstance(other, (ast.Tuple, ast.List, ast.Set)) else [other]
            if any((ctx.flow.dtype_of(e) or frozenset()) & HALF for e in elts):
                return True
    return False


def _cast_dtype_expr(ctx: Context, call: ast.Call) -> ast.AST | None:
    """The dtype argument of a model cast (``.to(device, dtype)``: the one that names a dtype); the call itself for
    `.half()`/`.bfloat16()`."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("half", "bfloat16"):
        return call
    found = keyword(call, "torch_dtype") or keyword(call, "dtype")
    if found is None and isinstance(func, ast.Attribute) and func.attr == "to":
        found = next((a for a in call.args[:2] if ctx.flow.dtype_of(a)), None)
    return found


def _half_cast_or_dtype(ctx: Context, call: ast.Call) -> bool:
    """``x.half()`` / ``x.bfloat16()``, or a call the dataflow knows makes a half dtype (``getattr(torch, "bfloat16")``)."""
    if isinstance(call.func, ast.Attribute) and call.func.attr in ("half", "bfloat16") and not call.args:
        return True
    return bool((ctx.flow.dtype_of(call) or frozenset()) & HALF)


def _half_chosen_here(ctx: Context, expr: ast.AST | None, depth: int = 0) -> bool:
    """Does `expr` name a half dtype through values written in this file: literals, `torch.bfloat16`, local names
    and `self.<name>` bound to them, `a if c else b`. A dtype read from a configuration object (`args.dtype`,
    `self.config.weight_dtype`) is chosen outside the file, even where the file assigns it on one path."""
    if expr is None or depth > 6:
        return False
    if isinstance(expr, ast.Call):
        return _half_cast_or_dtype(ctx, expr)
    if isinstance(expr, ast.IfExp):
        return _half_chosen_here(ctx, expr.body, depth + 1) or _half_chosen_here(ctx, expr.orelse, depth + 1)
    if isinstance(expr, ast.Constant) or (isinstance(expr, (ast.Name, ast.Attribute)) and (ctx.qualname(expr) or "").startswith("torch.")):
        return bool((ctx.flow.dtype_of(expr) or frozenset()) & HALF)
    own = isinstance(expr, ast.Name) or self_attribute(expr) is not None
    if not own:
        return False
    return any(value is not None and _half_chosen_here(ctx, value, depth + 1) for _, value in ctx.src.bindings(expr, ctx.src.scope(expr)))


def _param_retyped_alike(ctx: Context, node: ast.Assign, owner: str, dtypes: frozenset) -> bool:
    """Does a statement of the same block cast the parameter's own ``.data`` to the same dtype(s)
    (``p.data = p.data.half()`` next to ``p.grad = p.grad.half()``): then parameter and gradient keep one dtype."""
    for stmt in ctx.src.block_of(node) or ():
        if stmt is node or not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.value, ast.Call):
            continue
        target = stmt.targets[0]
        if isinstance(target, ast.Attribute) and target.attr == "data" and dotted(target.value) == owner \
                and ctx.flow.cast_dtype(stmt.value) == dtypes:
            return True
    return False


def _restored(ctx: Context, node: ast.Assign, owner: str) -> bool:
    """Does the function (a callback nested in it included) later write the parameter's ``.grad`` back in the
    parameter's own dtype (``p.grad.data = p.grad.data.to(dtype=p.dtype)``, ``.type_as(p)``) or drop it
    (``p.grad = None``)?"""
    fn = ctx.src.enclosing_function(node)
    for other in ast.walk(fn) if fn is not None else ():
        if other is node or not isinstance(other, ast.Assign) or len(other.targets) != 1 or _grad_owner(other.targets[0]) != owner:
            continue
        value = other.value
        if isinstance(value, ast.Constant) and value.value is None:
            return True
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            given = [*value.args, *(kw.value for kw in value.keywords if kw.arg == "dtype")]
            if value.func.attr in ("to", "type") and any(ast.unparse(a) == f"{owner}.dtype" for a in given):
                return True
            if value.func.attr == "type_as" and any(dotted(a) == owner for a in value.args):
                return True
    return False


@code_check("AMP003", triggers=(".grad =", ".grad=", ".grad.data =", ".grad.data="), also=((".to(", ".type(", "float()", "half()", "bfloat16()", "double()"),))
def grad_dtype_mismatch(ctx: Context) -> Iterator[CodeHit]:
    # Incident 3 (SimpleTuner #854): `param.grad.data = param.grad.data.to(torch.float32)` on a bf16 model; the next
    # micro-batch's backward accumulates into the fp32 `.grad`, and an Adam-family optimizer's step fails on the pair.
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
        if dtypes <= WIDE and not _params_made_half(ctx, node, owner):
            # Widening `.grad` breaks only half-precision parameters. Without this file making them half (a bf16
            # mention, autocast mixed precision with fp32 weights, a dtype read from a config object set elsewhere,
            # as SimpleTuner's trainer, whose config loader turns `gradient_precision=fp32` off) this is no error.
            continue
        if _param_retyped_alike(ctx, node, owner, dtypes):
            continue  # the parameter itself is cast alongside (an optimizer's fp16 round trip): the two stay one dtype
        if _restored(ctx, node, owner):
            continue  # retyped for a reduce and cast back to the parameter's dtype (or dropped) before the next backward
        yield _hit(ctx, node, owner, dtypes)


def _hit(ctx: Context, node: ast.Assign, owner: str, dtypes: frozenset) -> CodeHit:
    target = ast.unparse(node.targets[0])
    head = f"`{target}` is retyped to {describe(dtypes)} while the parameter keeps its own dtype: the next backward accumulates into it"
    # torch 2.13 accumulates the next backward into the retyped `.grad` (it keeps the `.grad`'s dtype); what fails is
    # the step of some optimizers (`optimizers.MIXED_DTYPE_STEP_FAILS`), checked on CPU.
    failing, first = steps_over(ctx, _loop_roots(ctx, node, owner))
    if failing:
        return node.targets[0], (f"{head}, and `{failing}.step()` (built over these parameters here) then fails on the mixed dtypes "
                                 "('expected dtype ... for `end`')")
    tail = (f"; `{first}` (built over these parameters here) steps it without error, so the "
            "parameter and its gradient silently differ in dtype") if first else \
        "; an Adam-family optimizer (Adam, AdamW, NAdam, RAdam, Adamax) or a fused one then fails at `step()`, SGD does not"
    return node.targets[0], head + tail, Severity.WARNING


def _loop_roots(ctx: Context, node: ast.AST, owner: str) -> set[str]:
    """The modules of ``for <owner> in m.parameters()`` (or ``for _, <owner> in m.named_parameters()``) around `node`."""
    for parent in ctx.src.ancestors(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            break
        if isinstance(parent, ast.For) and owner in {n.id for n in ast.walk(parent.target) if isinstance(n, ast.Name)}:
            return {root for n in ast.walk(parent.iter) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr in ("parameters", "named_parameters") and (root := dotted(n.func.value))}
    return set()


@policy_check("AMP003")
def grad_dtype_mismatch_policy(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # Incident 3: .grad kept in another dtype than the parameter's. torch 2.13 accumulates the next micro-batch's
    # backward into such a `.grad` without error (it keeps the `.grad`'s dtype); what fails is the step of torch's
    # Adam family and fused optimizers, on the mixed pair (checked on CPU; `optimizers.MIXED_DTYPE_STEP_FAILS`).
    if policy is None or policy.grads == policy.params or facts.trains is False:
        return
    steps = facts.grad_accum_steps
    fails = named_step_fails(facts.optimizer)
    if steps == 1 and not fails:
        return  # nothing is accumulated, and no optimizer that fails on the pair is named
    here = at("grads")
    # SimpleTuner from 26ee784 (Sep 2024) on turns `--gradient_precision=fp32` off; a config alone does not say which
    # SimpleTuner runs it (its reader knows only inside a checkout), so there the mismatch is likely, not certain.
    maybe = facts.grads_request == "version-dependent"
    accum = f" with gradient accumulation ({steps} steps)" if steps is not None and steps > 1 else ""
    head = (f".grad is kept in {policy.grads} for {policy.params} weights{accum}: backward accumulates the {policy.params} "
            f"gradients into it without error (torch keeps the .grad's dtype), so parameter and gradient differ in dtype at the step")
    if fails:
        tail = f", and `{facts.optimizer}` (the config's optimizer) fails there on the mixed dtypes ('expected dtype ... for `end`')"
    elif fails is False:
        tail = f"; `{facts.optimizer}` (the config's optimizer) steps such a pair without error"
    else:
        tail = ("; an Adam-family optimizer (Adam, AdamW, NAdam, RAdam, Adamax) or a fused one then fails at `step()`, SGD does not"
                + ("" if steps is not None else "; keep .grad in the parameter's dtype and use grad_accum for a wider accumulation buffer"))
    version = (" (on SimpleTuner before 26ee784, Sep 2024; later versions turn `--gradient_precision=fp32` off unless the "
               "optimizer needs fp32 gradients)") if maybe else ""
    yield Hit(head + version + tail, here, severity=None if fails and not maybe else Severity.WARNING,
              related=at.others(here, "params", "grad_accum_steps", "optimizer"))


@runtime_check("AMP003")
def grads_of_another_dtype(ctx: RuntimeContext) -> Iterator[Hit]:
    """Parameters whose `.grad` has another dtype than they do, seen at a micro-batch boundary or at the optimizer
    step, or a backward that accumulated two dtypes into one `.grad` (incident 3, also where torch does not raise)."""
    t = ctx.trace
    bad: dict[int, tuple] = {}
    for snap in t.grad_snapshots:
        if snap.param_dtype is not None and snap.grad_dtype != snap.param_dtype and snap.param_id not in bad:
            bad[snap.param_id] = (snap.when, snap.backward_passes, snap.grad_dtype, snap.param_dtype)
    accum = _mixed_accumulations(ctx)
    pids = list(dict.fromkeys(list(bad) + list(accum)))
    if not pids:
        return
    names = [t.param_name(p) for p in pids]
    if pids[0] in bad:
        when, _, gdt, pdt = bad[pids[0]]
    else:
        dts = t.op_at(accum[pids[0]][0]).in_dtypes
        pdt, gdt, when = dts[0], next(d for d in dts if d != dts[0]), "backward"
    acc_text = ""
    if accum:
        s = next(iter(accum.values()))[0]
        acc_text = f"; backward then accumulated {dtypes_text(sorted(set(t.op_at(s).in_dtypes), key=str))} gradients into it"
    cast = _grad_cast(ctx, gdt)
    failed = _step_failed_on(ctx, {gdt, pdt})
    # torch 2.13 accumulates into the retyped `.grad` without error; what fails is the step of an Adam-family or fused
    # optimizer on the pair. An error where this run's step failed so, a warning where it ran (or was not seen).
    tail = (f"; the optimizer step then failed on the mixed dtypes ({failed.head})" if failed is not None else
            "; nothing failed here, but an Adam-family (Adam, AdamW, NAdam, RAdam, Adamax) or fused optimizer fails at "
            "`step()` on such a pair, SGD does not")
    where = cast or Location(module=names[0].rpartition(".")[0], label=names[0].rpartition(".")[2], phase=Phase.OPTIMIZER)
    related = tuple(Location(module=n.rpartition(".")[0], label=n.rpartition(".")[2]) for n in names[:4]) if cast else ()
    yield Hit(f"{len(names)} parameter(s) hold a {name_of(gdt)} .grad for a {name_of(pdt)} parameter ({getattr(when, 'value', when)})"
              f"{acc_text}: {', '.join(names[:4])}{' ...' if len(names) > 4 else ''}{tail}",
              where, severity=None if failed is not None else Severity.WARNING,
              related=related + ((failed.where,) if failed is not None else ()),
              details={"params": names, "grad": name_of(gdt), "param": name_of(pdt), "accumulated": bool(accum),
                       "step_failed": failed is not None})


def _step_failed_on(ctx: RuntimeContext, dtypes: set) -> Any:
    """The failure of this run, where it is the optimizer step's on a dtype mismatch between operands of `dtypes` (a
    parameter's and its gradient's): the `FailureSite`, else None."""
    site = ctx.failure
    if site is None or site.where.phase != Phase.OPTIMIZER or not ctx.failure_is_dtype_mismatch():
        return None
    return site if dtypes <= {d for d, _ in site.inputs} else None


def _mixed_accumulations(ctx: RuntimeContext) -> dict[int, list[int]]:
    """param id -> AccumulateGrad ops that summed two dtypes into its .grad. Only the sums: hooks that run on the
    AccumulateGrad node do other work there (DDP's bf16 compression hook casts the bucket and copies the reduced bf16
    values back into fp32 gradients, which is no accumulation)."""
    out: dict[int, list[int]] = {}
    for op in ctx.trace.tagged(Tag.ACCUMULATE):
        if ctx.trace.op(op.seq).startswith("aten::add") and len({d for d, p in zip(op.in_dtypes, op.producers) if p is not None}) > 1:
            out.setdefault(op.extra[1], []).append(op.seq)
    return out


def _grad_cast(ctx: RuntimeContext, dtype: Any) -> Location | None:
    """The user's own cast of a gradient (incident 3: `param.grad.data = param.grad.data.to(fp32)`)."""
    t = ctx.trace
    for op in t.ops(Phase.OPTIMIZER):
        if t.op(op.seq) == "aten::_to_copy" and op.out_dtypes and op.out_dtypes[0] == dtype and op.in_dtypes[0] != dtype:
            return t.location(op.seq, "a .grad is cast here")
    return None
