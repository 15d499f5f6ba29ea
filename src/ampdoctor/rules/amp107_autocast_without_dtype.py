"""AMP107 autocast-without-dtype: `autocast` is entered without `dtype=`, so CUDA defaults to fp16 whatever the config says.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP107`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import GRAD_SCALERS, CodeHit, Context, calls_named
from ampdoctor.lint.python.dataflow import autocast_argument
from ampdoctor.lint.python.facts import AUTOCASTS
from ampdoctor.lint.python.resolve import has_star_kwargs


def _always_scaled(ctx: Context) -> ast.Call | None:
    """A GradScaler created unconditionally (no ``enabled=``, in no branch): the script does fp16 AMP on purpose,
    and autocast's fp16 default is what it wants."""
    for call, _ in calls_named(ctx, GRAD_SCALERS):
        if any(kw.arg == "enabled" for kw in call.keywords) or len(call.args) > 1:
            continue
        if not any(isinstance(a, (ast.If, ast.IfExp)) for a in ctx.src.ancestors(call)):
            return call
    return None


def _bf16_in_function(ctx: Context, call: ast.Call) -> ast.AST | None:
    """bf16 named in the function that enters autocast (a ``dtype=torch.bfloat16`` parameter it never passes on):
    the autocast was meant to run in it, a GradScaler beside it notwithstanding."""
    fn = ctx.src.enclosing_function(call)
    if fn is None:
        return None
    return next((e for e in ctx.facts.bf16_places() if ctx.src.enclosing_function(e) is fn or e in _defaults(fn)), None)


def _defaults(fn: ast.AST) -> list[ast.AST]:
    args = fn.args  # type: ignore[attr-defined]
    return [n for d in (*args.defaults, *args.kw_defaults) if d is not None for n in ast.walk(d)]


def _bf16_said(ctx: Context) -> str | None:
    """Where the file or its project says bf16: only then is autocast's fp16 default a surprise."""
    local = ctx.facts.bf16_evidence
    if local is not None:
        return f"this file uses bf16 (line {local.lineno})"
    for evidence in (ctx.project.autocast, ctx.project.half_model, ctx.project.half):
        if evidence is not None and "bf16" in evidence.dtypes:
            return f"this code runs in bf16: {evidence.describe()}"
    if ctx.project.trains_bf16 is not None:
        return f"this project configures bf16 training: {ctx.project.trains_bf16.describe()}"
    return None


@code_check("AMP107", triggers=("autocast",), project=True)
def autocast_without_dtype(ctx: Context) -> Iterator[CodeHit]:
    # Without bf16 anywhere in view, fp16 is what the author asked for, and paired with an unconditional GradScaler
    # it is deliberate fp16 AMP; saying "whatever the run is configured for" there would state a guess.
    said: str | None = None
    for call, name in calls_named(ctx, AUTOCASTS - {"torch.cpu.amp.autocast"}):
        if has_star_kwargs(call) or autocast_argument(call, name, "dtype") is not None:
            continue
        enabled = autocast_argument(call, name, "enabled")
        if isinstance(enabled, ast.Constant) and enabled.value is False:
            continue  # disabling autocast needs no dtype
        if name == "torch.autocast":
            device = autocast_argument(call, name, "device_type")
            values = [device.body, device.orelse] if isinstance(device, ast.IfExp) else [device]
            if all(isinstance(v, ast.Constant) and v.value != "cuda" for v in values):
                continue  # CPU/XPU autocast defaults to bf16
        near = _bf16_in_function(ctx, call)
        if near is not None:
            yield call, f"autocast without `dtype=` runs in float16 on CUDA, while this function uses bf16 (line {near.lineno})"
            continue
        if said is None:
            said = _bf16_said(ctx) or ""
            if said and _always_scaled(ctx) is not None:
                said = ""
        if said:
            yield call, f"autocast without `dtype=` runs in float16 on CUDA, while {said}"

