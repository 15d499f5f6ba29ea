"""AMP109 custom-bwd-dtype: `custom_bwd` runs backward in fp16 although forward ran under bf16 autocast.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP109`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.facts import disables_autocast


@code_check("AMP109", triggers=("custom_bwd",), also=(("bfloat16", "bf16"),), project=True)
def custom_bwd_dtype(ctx: Context) -> Iterator[CodeHit]:
    # pytorch #87979, fixed by PR #88029 in torch 2.0: the old `torch.cuda.amp.custom_bwd` re-entered autocast
    # with its default dtype, fp16, so a bf16 forward got an fp16 backward. With `custom_fwd(cast_inputs=...)` the
    # backward ran with autocast off, and a file that also imports `torch.amp.custom_bwd` picks per torch version.
    floor = ctx.project.torch_floor
    if floor is not None and floor[0] >= (2, 0):
        return  # the project requires a torch that has the fix (its requirement: floor[1])
    evidence = ctx.facts.bf16_evidence
    if evidence is None or any(n.module in ("torch.amp", "torch.amp.autocast_mode") and any(a.name == "custom_bwd" for a in n.names)
                               for n in ctx.src.import_froms):
        return
    for cls in ctx.src.classes:
        methods = [s for s in cls.body if isinstance(s, ast.FunctionDef)]
        if any(isinstance(d, ast.Call) and disables_autocast(d, ctx.src) for m in methods for d in m.decorator_list):
            continue
        for method in methods:
            for dec in method.decorator_list:
                if ctx.qualname(dec.func if isinstance(dec, ast.Call) else dec) == "torch.cuda.amp.custom_bwd":
                    yield dec, (f"`torch.cuda.amp.custom_bwd` on `{cls.name}.{method.name}` runs backward under fp16 autocast on "
                                f"torch < 2.0 although this file uses bf16 (line {evidence.lineno}){_allowed(floor)}; use "
                                "`torch.amp.custom_bwd(device_type=\"cuda\")`"), None if floor is not None else Severity.INFO


def _allowed(floor: tuple[tuple[int, int], str] | None) -> str:
    # Where the project names no torch it needs, nothing says it runs one older than 2.0 (2022), which any install
    # today is not: a note. A requirement that allows one (`torch>=1.13`) makes it a hazard of the project's runs.
    if floor is None:
        return ", which the project may not run: it says nothing of the torch it needs, and any torch since 2.0 has the fix"
    return f", which the project allows ({floor[1]})"

