"""AMP108 deprecated-cuda-amp: `torch.cuda.amp.*` (autocast, GradScaler, custom_fwd, custom_bwd) is deprecated.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP108`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import CodeHit, Context

DEPRECATED = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.GradScaler", "torch.cuda.amp.custom_fwd", "torch.cuda.amp.custom_bwd"})


@code_check("AMP108", triggers=("cuda.amp", "cuda import amp"))
def deprecated_cuda_amp(ctx: Context) -> Iterator[CodeHit]:
    for node in ctx.src.import_froms:
        if node.level == 0 and node.module == "torch.cuda.amp":
            names = [a.name for a in node.names if f"torch.cuda.amp.{a.name}" in DEPRECATED or a.name == "*"]
            if names:
                yield node, f"`from torch.cuda.amp import {', '.join(names)}` is deprecated; use `torch.amp`"
    for attr in ctx.src.attributes:
        if attr.attr in ("autocast", "GradScaler", "custom_fwd", "custom_bwd") and _used(ctx, attr):
            name = ctx.qualname(attr)
            if name in DEPRECATED:
                yield attr, f"`{name}` is deprecated; use `torch.amp.{attr.attr}` with an explicit device"


def _used(ctx: Context, attr: ast.Attribute) -> bool:
    """Called or applied as a decorator, rather than named (dynamo's tables of context managers name them)."""
    parent = ctx.src.parents.get(attr)
    if isinstance(parent, ast.Call) and parent.func is attr:
        return True
    return isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and attr in parent.decorator_list

