"""AMP108 deprecated-cuda-amp: `torch.cuda.amp.*` (autocast, GradScaler, custom_fwd, custom_bwd) is deprecated.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP108`)."""

from __future__ import annotations

import ast
from typing import Any, Iterator, Mapping

from ampdoctor.core.registry import code_check, code_fix
from ampdoctor.lint.cstedit import dotted as cst_dotted
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


@code_fix("AMP108")
def use_torch_amp(module: Any, lines: Mapping[int, tuple[Mapping[str, Any], ...]]) -> Any:
    """``torch.cuda.amp.autocast(...)`` -> ``torch.autocast("cuda", ...)`` (its first positional is `enabled`, which
    becomes a keyword), ``torch.cuda.amp.GradScaler(...)`` -> ``torch.amp.GradScaler("cuda", ...)`` (the same
    positional order after the device). Only calls spelled through the `torch` module at a reported line: an alias,
    a `from` import or a decorator (`custom_fwd` takes `device_type=` and other arguments) is left for a person."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    class Rewrite(cst.CSTTransformer):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def __init__(self) -> None:
            super().__init__()
            self.gated = 0  # inside an `if` on the torch version: the old spelling is the fallback for old torch

        def visit_If(self, node: Any) -> None:
            self.gated += _version_test(cst.Module([]).code_for_node(node.test))

        def leave_If(self, original: Any, updated: Any) -> Any:
            self.gated -= _version_test(cst.Module([]).code_for_node(original.test))
            return updated

        def leave_Call(self, original: Any, updated: Any) -> Any:
            dotted = cst_dotted(original.func)
            if dotted not in _REWRITES or self.gated or self.get_metadata(PositionProvider, original).start.line not in lines:
                return updated
            target, device, first = _REWRITES[dotted]
            args = list(updated.args)
            if first and args and args[0].keyword is None and args[0].star == "":
                args[0] = args[0].with_changes(keyword=cst.Name(first), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
            device_arg = cst.Arg(cst.SimpleString(f'"{device}"'))
            return updated.with_changes(func=cst.parse_expression(target), args=[device_arg, *args] if args else [device_arg])

    return MetadataWrapper(module).visit(Rewrite())


# spelled call -> (replacement, device, keyword for the old first positional argument)
_REWRITES = {
    "torch.cuda.amp.autocast": ("torch.autocast", "cuda", "enabled"),
    "torch.cuda.amp.GradScaler": ("torch.amp.GradScaler", "cuda", None),
}


def _version_test(test: str) -> int:
    return int(any(w in test for w in ("version", "hasattr", "TORCH_", "torch_2", "is_torch")))

