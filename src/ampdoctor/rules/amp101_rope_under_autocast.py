"""AMP101 rope-under-autocast: RoPE angles (`inv_freq @ position_ids`, cos/sin) are computed under an enabled bf16/fp16 autocast.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP101`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.dtypes import name_of
from ampdoctor.lint.python.context import TRIG, CodeHit, Context, angle_matmuls, construction_only, rotary_said
from ampdoctor.lint.python.resolve import names_rotary

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


def _rotary_functions(ctx: Context) -> set[ast.AST]:
    """Functions (or the module, for top-level code) that take cos/sin of something, and the methods of classes
    named like a rotary embedding."""
    found: set[ast.AST] = set()
    for call in ctx.src.calls:
        name = ctx.qualname(call.func)
        if name in TRIG if name else isinstance(call.func, ast.Attribute) and call.func.attr in ("cos", "sin"):
            found.add(ctx.src.enclosing_function(call) or ctx.src.tree)
    for cls in ctx.src.classes:
        if names_rotary(cls.name):
            found.update(s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return found


@code_check("AMP101", triggers=("freq",), also=(("@", "matmul", "mm(", "einsum"), ("autocast", "mixed_precision", "precision=", "bf16=", "fp16=")), project=True)
def rope_under_autocast(ctx: Context) -> Iterator[CodeHit]:
    # transformers PR #29285, diffusers PR #13922. Autocast's lower-precision list has matmul/mm/bmm and, on
    # CUDA, einsum: `.float()` on both operands does not help, the product is still bf16. An elementwise product
    # (`pos[..., None] * inv_freq`, `torch.outer`) is not on the list and stays fp32, so only matmuls are reported.
    # Conservative: a library model file that never mentions autocast is not reported; the file has to enable
    # autocast or mixed precision, or disable autocast around other code (so it is meant to run under autocast).
    facts = ctx.facts
    if facts.mixed_precision_on:
        evidence = f"this file enables autocast or mixed precision (line {facts.mixed_precision_on[0].lineno})"
    elif facts.mixed_precision:  # offered by the command line or the environment, off in a run that names no option
        evidence = f"this file may enable mixed precision: its runs can choose a half mode (line {facts.mixed_precision[0].lineno})"
    elif facts.autocast_disabled:
        evidence = f"this file runs under autocast: it turns it off or to fp32 around other code (line {facts.autocast_disabled[0].lineno})"
    elif ctx.project.autocast is not None:
        evidence = f"this file's code runs under {ctx.project.autocast.describe()}"
    elif ctx.project.guarded is not None:
        evidence = f"its project's models are written to run under autocast: {ctx.project.guarded.describe()}"
    else:
        return
    rotary = None
    for node in angle_matmuls(ctx):
        if rotary is None:
            rotary = _rotary_functions(ctx)
        fn = ctx.src.enclosing_function(node)
        if (fn or ctx.src.tree) not in rotary or facts.autocast_off_at(node) or construction_only(ctx, fn):
            continue
        kind = "RoPE angles" if rotary_said(ctx) else "angles for a cos/sin table"
        yield node, (f"{kind} `{ast.unparse(node)[:60]}` are a matmul, which autocast runs in bf16/fp16 even on fp32 "
                     f"operands; {evidence}. Compute them inside `torch.autocast(device_type, enabled=False)`")


@runtime_check("AMP101")
def angles_under_autocast(ctx: RuntimeContext) -> Iterator[Hit]:
    """What the ops show: a matmul that autocast ran in bf16/fp16 on positions it cast from fp32 (integer values
    from an arange or an integer tensor), whose product reaches a cos/sin (`RuntimeContext.autocast_angles`)."""
    t = ctx.trace
    for mm, (cast, trig) in ctx.autocast_angles.items():
        dt = name_of(t.out_dtype(mm))
        top = max((t.op_at(s).extra[1] for s in trig if t.op_at(s).extra), default=None)
        yield Hit(f"{t.op(mm)} computes rotary angles in {dt} under autocast: autocast cast the fp32 positions to {dt} "
                  f"({t.op(cast)}), so the angles" + (f" (up to {top:g})" if top is not None else "")
                  + f" are {dt} when {t.op(trig[0])} takes them; compute them inside `torch.autocast(device_type, enabled=False)`",
                  t.location(mm), related=(t.location(trig[0], "cos/sin of them"),), details={"dtype": dt, "max_angle": top})
