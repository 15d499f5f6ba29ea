"""AMP138 ema-low-precision: EMA (shadow) weights are kept in bf16/fp16, so with a decay of 0.999 or more their updates round away.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP138`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Tag
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.dtypes import describe_half
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.dataflow import FP32, FP64, HALF, describe
from ampdoctor.lint.python.resolve import dotted, keyword, last_identifier, tokens

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext

EMA_WORDS = frozenset({"ema", "shadow", "averaged", "swa", "polyak"})
# Wrappers that keep a moving average of the parameters they are given (diffusers, timm, torch, ema-pytorch).
EMA_CLASSES = frozenset({"EMAModel", "ModelEma", "ModelEmaV2", "ModelEmaV3", "AveragedModel", "EMA", "ExponentialMovingAverage"})
UPDATES = frozenset({"step", "update", "update_parameters", "update_ema", "update_model_average", "lerp_", "mul_"})
COPIES = frozenset({"copy.deepcopy", "torch.optim.swa_utils.AveragedModel"})


def _is_ema(expr: ast.AST | None) -> bool:
    return expr is not None and bool(tokens(last_identifier(expr) or "") & EMA_WORDS)


def _updated(ctx: Context) -> bool:
    """The file moves an average: ``ema.step(...)``, ``ema_model.update(...)``, ``shadow.lerp_(param, 1 - decay)``."""
    for call in ctx.src.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in UPDATES and ctx.qualname(func) is None:
            if any(_is_ema(node) for node in (func.value, *call.args[:1])) or "ema" in tokens(
                    getattr(ctx.src.enclosing_function(call), "name", "")):
                return True
    return False


def _made_float_later(ctx: Context, name: str, line: int) -> bool:
    """The EMA copy is cast back to fp32 after it was made (`ema.float()`, `ema.to(torch.float32)`)."""
    for call in ctx.src.calls:
        if call.lineno > line and isinstance(call.func, ast.Attribute) and dotted(call.func.value) == name:
            dtypes = ctx.flow.cast_dtype(call)
            if dtypes and dtypes <= FP32 | FP64:
                return True
    return False


def _half_source(ctx: Context, call: ast.Call) -> frozenset | None:
    """The dtype of the model a copy is made from, if it was cast to half before (same scope, earlier line)."""
    arg = call.args[0] if call.args else None
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "parameters":
        arg = arg.func.value
    name = dotted(arg) if arg is not None else None
    for cast in ctx.facts.model_casts:
        if cast.name == name and cast.node.lineno < call.lineno and ctx.src.scope(cast.node) is ctx.src.scope(call):
            return cast.dtypes
    return None


def _stored_as(ctx: Context, call: ast.Call) -> str | None:
    parent = ctx.src.parents.get(call)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        return dotted(parent.targets[0])
    return None


def _half_ema(ctx: Context, call: ast.Call) -> str | None:
    """What makes this call's EMA copy half precision, if it does."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("to", "half", "bfloat16") and _is_ema(func.value) and ctx.qualname(func) is None:
        dtypes = ctx.flow.cast_dtype(call)
        name = dotted(func.value)
        if dtypes and dtypes & HALF and name and not _made_float_later(ctx, name, call.lineno):
            return f"the EMA copy `{name}` is cast to {describe_half(dtypes)}"
        return None
    if ctx.qualname(func) not in COPIES and last_identifier(func) not in EMA_CLASSES:
        return None
    name = _stored_as(ctx, call)
    if not name or not _is_ema(ast.parse(name, mode="eval").body) or _made_float_later(ctx, name, call.lineno):
        return None
    asked = keyword(call, "dtype")
    if asked is not None:  # `EMAModel(unet, dtype=...)` stores the average in the dtype it is given
        dtypes = ctx.flow.dtype_of(asked, ctx.src.scope(call))
        return f"the EMA copy `{name}` is kept in {describe(dtypes & HALF)}" if dtypes and dtypes & HALF else None
    dtypes = _half_source(ctx, call)
    return f"the EMA copy `{name}` is made from a model cast to {describe_half(dtypes)}" if dtypes else None


# "ema" alone is in gemma, schema and remaining: the triggers ask for it as a word piece.
@code_check("AMP138", triggers=("ema_", "_ema", "ema.", "ema(", "ema =", "EMA", "shadow", "Averaged"),
            also=(("bfloat16", "float16", "half", "dtype"),))
def ema_low_precision(ctx: Context) -> Iterator[CodeHit]:
    # sd_dreambooth_extension PR #1415: `ema_model.to(device, dtype=weight_dtype)` with weight_dtype fp16/bf16 left
    # the EMA model at its initial weights, every (1 - decay) * (param - ema) rounded to zero.
    if not _updated(ctx):
        return
    for call in ctx.src.calls:
        hit = _half_ema(ctx, call)
        if hit:
            yield call, (f"{hit}: with a decay of 0.999 or more its updates (1 - decay) * (param - ema) round to zero; "
                         f"keep the EMA weights in fp32")


# A moving average is reported when most of its sampled updates are below half an ulp (they round to nothing).
LOST_SHARE = 0.5


@runtime_check("AMP138")
def average_rounded_away(ctx: RuntimeContext) -> Iterator[Hit]:
    """A `lerp_` into half-precision weights outside the optimizer step (an EMA update) whose steps, measured on a
    sample, are mostly smaller than half a unit in the last place of the weights they move."""
    t = ctx.trace
    for seq, lost, considered in t.tallied(Tag.AVERAGE):
        if considered and lost / considered >= LOST_SHARE:
            yield Hit(f"{lost} of {considered} sampled moving-average updates of half-precision weights are below half a "
                      f"unit in their last place and round to nothing: the average stays where it started",
                      t.location(seq), details={"rounded_away": lost, "sampled_updates": considered})
