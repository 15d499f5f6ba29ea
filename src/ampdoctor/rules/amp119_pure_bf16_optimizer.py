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
from ampdoctor.lint.python.optimizers import PLAIN_OPTIMIZERS, overlap, parameter_roots, stepped, wrapped_in_master
from ampdoctor.lint.python.resolve import dotted
from ampdoctor.policy import Policy

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext




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
        if (call.lineno > cast.node.lineno and stepped(ctx, call) and not _steps_other_modules(ctx, call)
                and not wrapped_in_master(ctx, call)):
            yield call, (f"`{name.rsplit('.', 1)[-1]}` updates weights cast to bfloat16 (line {cast.node.lineno}) without fp32 master "
                         "weights; small updates round to nothing")


def _steps_other_modules(ctx: Context, call: ast.Call) -> bool:
    """The optimizer steps only the parameters of modules named apart from every module the file casts to half, and
    each of those is frozen here (``vae.requires_grad_(False)``): a trainer that casts its frozen encoders and trains
    an fp32 adapter beside them. Frozen, a cast module has nothing to step even if a wrapper named otherwise holds it;
    an adapter added to it after the cast is stepped through its name (``unet.parameters()``), which is not apart."""
    roots = parameter_roots(ctx, call)
    casts = [c.name for c in ctx.facts.model_casts]
    if not roots or not casts or None in casts:
        return False
    frozen = _frozen(ctx)
    return all(name in frozen and not any(overlap(name, root) for root in roots) for name in casts if name is not None)


def _frozen(ctx: Context) -> set[str]:
    """Modules the file freezes whole: ``m.requires_grad_(False)`` or ``m.requires_grad_(requires_grad=False)``."""
    out = set()
    for node in ctx.src.calls:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_":
            arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "requires_grad"), None)
            if isinstance(arg, ast.Constant) and arg.value is False and (name := dotted(node.func.value)) is not None:
                out.add(name)
    return out


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
