"""AMP119 pure-bf16-optimizer: Weights are bf16 and a plain optimizer updates them without fp32 master weights, Kahan summation or stochastic rounding.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP119`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, policy_check, runtime_check
from ampdoctor.facts import RunFacts, half_weights_without_master
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
        if call.lineno > cast.node.lineno and _stepped(ctx, call):
            yield call, (f"`{name.rsplit('.', 1)[-1]}` updates weights cast to bfloat16 (line {cast.node.lineno}) without fp32 master "
                         "weights; small updates round to nothing")


# Calls that take an optimizer and step it: accelerate/Lightning/DeepSpeed wrappers, an HF Trainer, a GradScaler.
_STEPPERS = frozenset({"prepare", "initialize", "Trainer", "step", "setup", "setup_optimizers", "fit"})


def _stepped(ctx: Context, call: ast.Call) -> bool:
    """Is the optimizer `call` builds the one that trains: stepped (`opt.step()`), handed to something that steps it
    (`accelerator.prepare(model, opt)`, `scaler.step(opt)`, `Trainer(optimizers=(opt, ...))`), or returned (a
    `configure_optimizers`). One built only to load a checkpoint into is not."""
    parent = ctx.src.parents.get(call)
    if isinstance(parent, (ast.Return, ast.Call, ast.Tuple, ast.List, ast.keyword)):
        return True
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1):
        return True  # used where this check cannot follow it: assume it trains
    name = dotted(parent.targets[0])
    if name is None:
        return True
    for use in ctx.src.calls:
        func = use.func
        if isinstance(func, ast.Attribute) and func.attr == "step" and dotted(func.value) == name:
            return True
        if (last_identifier(func) or "") in _STEPPERS and any(dotted(a) == name for a in (*use.args, *(k.value for k in use.keywords))):
            return True
    return any(isinstance(node, ast.Return) and node.value is not None and dotted(node.value) == name for node in ast.walk(ctx.src.tree))


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
