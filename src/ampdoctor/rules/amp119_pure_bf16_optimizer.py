"""AMP119 pure-bf16-optimizer: Weights are bf16 and a plain optimizer updates them without fp32 master weights, Kahan summation or stochastic rounding.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP119`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, policy_check, runtime_check
from ampdoctor.facts import MASTER_OPTIMIZERS, RunFacts, half_weights_without_master
from ampdoctor.lint.python.context import CodeHit, Context, calls_named
from ampdoctor.lint.python.resolve import dotted, last_identifier
from ampdoctor.policy import Policy

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext

PLAIN_OPTIMIZERS = frozenset(f"torch.optim.{n}" for n in (
    "AdamW", "Adam", "SGD", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta", "Adafactor"))


def _cast_model_without_autocast(ctx: Context):
    casts = ctx.facts.model_casts
    if not casts or ctx.facts.mixed_precision_on:
        return None
    return casts[0]


@code_check("AMP119", triggers=("bfloat16", "bf16"), also=(("optim",),))
def pure_bf16_optimizer(ctx: Context) -> Iterator[CodeHit]:
    # pytorch/ao PR #1124: bf16 weights + plain AdamW: updates below ~1e-3 of a weight round away.
    cast = _cast_model_without_autocast(ctx)
    if cast is None or "bf16" not in cast.dtypes:
        return
    for call, name in calls_named(ctx, PLAIN_OPTIMIZERS):
        if (call.lineno > cast.node.lineno and _stepped(ctx, call) and not _steps_other_modules(ctx, call)
                and not _wrapped_in_master(ctx, call)):
            yield call, (f"`{name.rsplit('.', 1)[-1]}` updates weights cast to bfloat16 (line {cast.node.lineno}) without fp32 master "
                         "weights; small updates round to nothing")


_PARAMETERS = frozenset({"parameters", "named_parameters"})


def _wrapped_in_master(ctx: Context, call: ast.Call) -> bool:
    """The file wraps optimizers in one that keeps fp32 master weights (DeepSpeed's BF16_Optimizer, Megatron's
    Float16Optimizer: an engine that builds the plain "basic" optimizer and hands it on), and does not step this
    one itself: what steps the half weights is the wrapper, from its fp32 copy."""
    if not any(MASTER_OPTIMIZERS.fullmatch(last_identifier(c.func) or "") for c in ctx.src.calls):
        return False
    name = _stored_as(ctx, call)
    return name is None or not _steps_itself(ctx, name)


def _steps_other_modules(ctx: Context, call: ast.Call) -> bool:
    """The optimizer steps only the parameters of modules named apart from every module the file casts to half, and
    each of those is frozen here (``vae.requires_grad_(False)``): a trainer that casts its frozen encoders and trains
    an fp32 adapter beside them. Frozen, a cast module has nothing to step even if a wrapper named otherwise holds it;
    an adapter added to it after the cast is stepped through its name (``unet.parameters()``), which is not apart."""
    roots = _parameter_roots(ctx, call)
    casts = [c.name for c in ctx.facts.model_casts]
    if not roots or not casts or None in casts:
        return False
    frozen = _frozen(ctx)
    return all(name in frozen and not any(_overlap(name, root) for root in roots) for name in casts if name is not None)


def _overlap(a: str, b: str) -> bool:
    """One dotted module name is the other or holds it (``model`` and ``model.lm_head``)."""
    pa, pb = a.split("."), b.split(".")
    return pa[:len(pb)] == pb or pb[:len(pa)] == pa


def _parameter_roots(ctx: Context, call: ast.Call) -> set[str] | None:
    """The modules whose ``.parameters()`` the optimizer is given (through a variable assigned once before it,
    ``itertools.chain``, ``filter``, comprehensions and param-group dicts), or None where anything else could add
    parameters to it."""
    expr = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "params"), None)
    if isinstance(expr, ast.Name):
        expr = _only_assignment(ctx, expr.id, call)
    if expr is None:
        return None
    bound = _bound_names(expr)
    roots: set[str] = set()
    for source in _param_sources(expr):
        found = _roots_in(source, bound)
        if found is None:
            return None
        roots |= found
    return roots or None


def _bound_names(expr: ast.AST) -> set[str]:
    """Names bound inside `expr`: comprehension targets and lambda arguments (``lambda p: p.requires_grad``)."""
    bound = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return bound | {a.arg for n in ast.walk(expr) if isinstance(n, ast.Lambda) for a in n.args.args}


def _param_sources(expr: ast.AST) -> list[ast.AST]:
    """Where parameters can come from: in param groups (``[{"params": m.parameters(), "lr": args.lr}]``) only the
    "params" values, else the whole expression."""
    return [v for d in ast.walk(expr) if isinstance(d, ast.Dict)
            for k, v in zip(d.keys, d.values) if isinstance(k, ast.Constant) and k.value == "params"] or [expr]


# What a parameter list is wrapped in on its way to the optimizer.
_WRAPPERS = frozenset({"itertools", "chain", "list", "filter", "tuple", "iter", "sorted"})


def _roots_in(expr: ast.AST, bound: set[str]) -> set[str] | None:
    """The modules of the ``m.parameters()`` calls in `expr`; None where one is called on something not named, or
    where `expr` names a variable that is neither such a module, a wrapper nor bound inside it (another variable's
    parameters, or a list built elsewhere)."""
    roots = set()
    for n in ast.walk(expr):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _PARAMETERS:
            root = dotted(n.func.value)
            if root is None:
                return None
            roots.add(root)
    known = bound | _WRAPPERS | {r.split(".")[0] for r in roots}
    return None if any(isinstance(n, ast.Name) and n.id not in known for n in ast.walk(expr)) else roots


def _only_assignment(ctx: Context, name: str, call: ast.Call) -> ast.AST | None:
    """The value of the one plain assignment of `name` in the optimizer's function before it, when nothing else
    (an augmented assignment, `append`/`extend`/`insert`, a second assignment) changes it."""
    scope = ctx.src.enclosing_function(call) or ctx.src.tree
    found = None
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if found is not None or node.lineno >= call.lineno:
                return None
            found = node.value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name) and node.target.id == name:
            return None
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("append", "extend", "insert")
              and isinstance(node.func.value, ast.Name) and node.func.value.id == name):
            return None
    return found


def _frozen(ctx: Context) -> set[str]:
    """Modules the file freezes whole: ``m.requires_grad_(False)`` or ``m.requires_grad_(requires_grad=False)``."""
    out = set()
    for node in ctx.src.calls:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_":
            arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "requires_grad"), None)
            if isinstance(arg, ast.Constant) and arg.value is False and (name := dotted(node.func.value)) is not None:
                out.add(name)
    return out


# Calls that take an optimizer and step it: accelerate/Lightning/DeepSpeed wrappers, an HF Trainer, a GradScaler.
_STEPPERS = frozenset({"prepare", "initialize", "Trainer", "step", "setup", "setup_optimizers", "fit"})


def _stepped(ctx: Context, call: ast.Call) -> bool:
    """Is the optimizer `call` builds the one that trains: stepped (`opt.step()`), handed to something that steps it
    (`accelerator.prepare(model, opt)`, `scaler.step(opt)`, `Trainer(optimizers=(opt, ...))`), or returned (a
    `configure_optimizers`). One built only to load a checkpoint into is not."""
    name = _stored_as(ctx, call)
    if name is None:
        return True  # returned, handed on in place, or used where this check cannot follow it: assume it trains
    if _steps_itself(ctx, name):
        return True
    for use in ctx.src.calls:
        if (last_identifier(use.func) or "") in _STEPPERS and any(dotted(a) == name for a in (*use.args, *(k.value for k in use.keywords))):
            return True
    return any(isinstance(node, ast.Return) and node.value is not None and dotted(node.value) == name for node in ast.walk(ctx.src.tree))


def _stored_as(ctx: Context, call: ast.Call) -> str | None:
    """The variable or attribute the optimizer `call` builds is assigned to (``opt = AdamW(...)``), else None."""
    parent = ctx.src.parents.get(call)
    return dotted(parent.targets[0]) if isinstance(parent, ast.Assign) and len(parent.targets) == 1 else None


def _steps_itself(ctx: Context, name: str) -> bool:
    """The file calls ``name.step()``."""
    return any(isinstance(c.func, ast.Attribute) and c.func.attr == "step" and dotted(c.func.value) == name for c in ctx.src.calls)


@policy_check("AMP119")
def pure_bf16_optimizer_policy(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # pytorch/ao PR #1124: half weights updated in place by a plain optimizer lose updates below ~1/256 of a weight.
    if not half_weights_without_master(policy, facts) or facts.autocast:
        return
    assert policy is not None
    here = at("params")
    if facts.optimizer_kind == "plain":
        yield Hit(f"weights are {policy.params} and the optimizer keeps no fp32 master copy, Kahan sum or stochastic rounding: "
                  "updates below ~1/256 of a weight are lost (suppress if this is deliberate)", here, related=at.others(here, "optimizer_kind"))
    else:
        yield Hit(f"params={policy.params}: updates below ~1/256 of a weight round away unless the optimizer keeps fp32 master weights, "
                  "Kahan sums or rounds stochastically", here, severity=Severity.INFO)


@runtime_check("AMP119")
def updates_rounded_away(ctx: RuntimeContext) -> Iterator[Hit]:
    # Under autocast the same measurement is evidence for AMP128 (mixed precision without master weights).
    if ctx.observed.facts.autocast:
        return
    for share, where, details in ctx.rounded_updates():
        yield Hit(f"{share:.1%} of the half-precision parameter elements with a non-zero gradient did not change in {details['optimizer']}.step(): "
                  "their update was below half an ulp and rounded away", where, details=details)
