"""AMP202 fp16-without-loss-scaling: fp16 compute runs without loss scaling.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP202`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.registry import Hit, code_check, policy_check
from ampdoctor.dtypes import FP16, canonical
from ampdoctor.facts import RunFacts
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.resolve import keyword, last_identifier
from ampdoctor.policy import Policy


@policy_check("AMP202")
def fp16_without_loss_scaling(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    if policy is None or policy.compute != FP16 or policy.loss_scale != "none" or facts.trains is False:
        return
    yield Hit("fp16 compute without loss scaling: small gradients underflow to zero", at("compute"))


@code_check("AMP202", triggers=("GradScaler",))
def scaler_enabled_by_a_value_never_held(ctx: Context) -> Iterator[CodeHit]:
    # A GradScaler turned on by `enabled=(cfg.dtype == "float16")` while the setting spells fp16 "fp16": the
    # comparison is never true, so the fp16 run has no loss scaling and nothing fails.
    for call in ctx.src.calls:
        if not (last_identifier(call.func) or "").endswith("GradScaler"):
            continue
        test = _fp16_test(keyword(call, "enabled"))
        if test is None:
            continue
        setting, wanted = test
        held = _closed_values(ctx, setting)
        if held is None or wanted & held[0]:
            continue
        spelled = sorted(v for v in held[0] if canonical(v) == FP16)
        if spelled:
            values = ", ".join(repr(v) for v in sorted(held[0]))
            yield call, (f"the GradScaler is enabled only when `{ast.unparse(setting)[:40]}` is "
                         f"{' or '.join(repr(w) for w in sorted(wanted))}, but it holds only {values} ({held[1]}): its "
                         f"fp16 run, {spelled[0]!r}, trains without loss scaling; compare with {spelled[0]!r}")


def _fp16_test(enabled: ast.expr | None) -> tuple[ast.expr, frozenset[str]] | None:
    """``setting == "float16"`` (either side) or ``setting in ("fp16", "half")``: the setting and the fp16 names it is
    compared with; None for any other test."""
    if not isinstance(enabled, ast.Compare) or len(enabled.ops) != 1:
        return None
    left, op, right = enabled.left, enabled.ops[0], enabled.comparators[0]
    if isinstance(op, ast.Eq):
        setting, literal = (right, left) if isinstance(left, ast.Constant) else (left, right)
        names = [literal]
    elif isinstance(op, ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
        setting, names = left, list(right.elts)
    else:
        return None
    if not names or not all(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in names):
        return None
    wanted = frozenset(n.value for n in names)
    if isinstance(setting, ast.Constant) or not any(canonical(w) == FP16 for w in wanted):
        return None
    return setting, wanted


def _closed_values(ctx: Context, setting: ast.expr) -> tuple[frozenset[str], str] | None:
    """Every string `setting` can hold, where the file closes the set: a dict of string keys indexed by it
    (``{"fp32": ..., "fp16": ...}[cfg.dtype]`` raises on any other) or its command-line option's ``choices=``; with
    where that is said."""
    text = ast.unparse(setting)
    for node in ast.walk(ctx.src.tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict) and ast.unparse(node.slice) == text:
            keys = node.value.keys
            if keys and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
                return frozenset(k.value for k in keys), f"the table it indexes at line {node.lineno}"
    name = last_identifier(setting)
    choices = ctx.facts.choices(name) if name else None
    return (choices, f"the choices of its --{name} option") if choices else None
