"""AMP134 autocast-lost-in-recompute: An activation-checkpointing recompute runs without the forward's autocast state.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP134`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.facts import handles_autocast
from ampdoctor.lint.python.resolve import method, tokens


def _stored_functions(forward: ast.FunctionDef) -> set[str]:
    """Attributes of the autograd ctx that the forward sets from a parameter: ``ctx.run_function = run_function``."""
    params = {a.arg for a in forward.args.args[1:]}
    ctx_name = forward.args.args[0].arg if forward.args.args else "ctx"
    out = set()
    for node in ast.walk(forward):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in params:
            for target in node.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == ctx_name:
                    if tokens(target.attr) & {"function", "fn", "func", "forward", "run", "module"}:
                        out.add(target.attr)
    return out


def _under_autocast(ctx: Context, call: ast.Call, backward: ast.FunctionDef) -> bool:
    """The recompute call sits in a ``with <...autocast...>(...)`` block of the backward, or the backward is decorated
    with one (``custom_bwd`` runs it under the forward's autocast state)."""
    if any(handles_autocast(d) or "custom_bwd" in ast.unparse(d) for d in backward.decorator_list):
        return True
    for parent in ctx.src.ancestors(call):
        if parent is backward:
            return False
        if isinstance(parent, ast.With) and any(handles_autocast(i.context_expr) for i in parent.items):
            return True
    return False


def _never_applied(ctx: Context, cls: ast.ClassDef) -> bool:
    """Every mention of the Function in its file is a ``Cls.apply(...)`` inside module-level functions that nothing in
    the project calls (`ProjectContext.unused_helpers`): the project's own runs never recompute through it."""
    unused = ctx.project.unused_helpers
    if not unused:
        return False
    mentions = [n for n in ast.walk(ctx.src.tree) if isinstance(n, ast.Name) and n.id == cls.name]
    for name in mentions:
        parent = ctx.src.parents.get(name)
        helper = next((a for a in ctx.src.ancestors(name) if isinstance(a, ast.FunctionDef)), None)
        if not (isinstance(parent, ast.Attribute) and parent.attr == "apply" and helper is not None
                and ctx.src.parents.get(helper) is ctx.src.tree and helper.name in unused):
            return False
    return bool(mentions)


@code_check("AMP134", triggers=("autograd.Function", "Function)"), also=(("backward",),), project=True)
def recompute_without_autocast(ctx: Context) -> Iterator[CodeHit]:
    # pytorch #71124, TransformerEngine #787: a checkpoint that recomputes in backward outside the forward's autocast.
    if ctx.project.autocast_nowhere:
        return  # no run of this project has an autocast state for the recompute to lose (half comes from casts)
    for cls in ctx.src.classes:
        if not any(ctx.qualname(b) == "torch.autograd.Function" for b in cls.bases) or _never_applied(ctx, cls):
            continue
        forward, backward = method(cls, "forward"), method(cls, "backward")
        if forward is None or backward is None or not backward.args.args:
            continue
        stored = _stored_functions(forward)
        if not stored or handles_autocast(forward):
            continue
        ctx_name = backward.args.args[0].arg
        for call in (n for n in ast.walk(backward) if isinstance(n, ast.Call)):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr in stored and isinstance(func.value, ast.Name) and func.value.id == ctx_name:
                if not _under_autocast(ctx, call, backward):
                    yield _finding(ctx, call, f"`{cls.name}.backward` recomputes the forward (`{ast.unparse(func)}`)")
                break


def _finding(ctx: Context, call: ast.Call, what: str) -> CodeHit:
    message = (f"{what} without the autocast state the forward ran under: the recompute runs in fp32 (or mixes dtypes) "
               "when the forward was autocast; record `torch.get_autocast_dtype`/`is_autocast_enabled` in forward and "
               "re-enter `torch.autocast` around the recompute")
    if ctx.project.autocast_unseen and ctx.facts.half_autocast is None:
        # A hazard for the runs that autocast around it, but none of this project's own is seen to: a note.
        return call, (message + "; nothing in this project is seen running it under autocast (no module run under "
                      "autocast imports it, no half-precision config runs it)"), Severity.INFO
    return call, message
