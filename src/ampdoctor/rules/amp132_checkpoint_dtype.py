"""AMP132 checkpoint-dtype: `load_state_dict(..., assign=True)` gives a half-precision model the checkpoint's dtypes.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP132`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.dataflow import HALF, describe
from ampdoctor.lint.python.facts import is_model_expr
from ampdoctor.lint.python.resolve import dotted, keyword

_CASTS = ("to", "half", "bfloat16", "float", "type", "to_empty")


def _half_default_dtype(ctx: Context, scope: ast.AST, line: int) -> tuple[ast.Call, frozenset] | None:
    """``torch.set_default_dtype(torch.bfloat16)`` earlier in the same scope: modules built after it are half."""
    for call in ctx.src.calls:
        if call.lineno < line and ctx.src.scope(call) is scope and ctx.qualname(call.func) == "torch.set_default_dtype" and call.args:
            dtypes = ctx.flow.dtype_of(call.args[0], scope)
            if dtypes and dtypes <= HALF:
                return call, dtypes
    return None


def _intended_half(ctx: Context, model: str, load: ast.Call) -> tuple[ast.Call, frozenset] | None:
    """Where the model was made half before the load: a cast of it in the same scope, or a half default dtype."""
    scope = ctx.src.scope(load)
    receiver = load.func.value if isinstance(load.func, ast.Attribute) else load
    rebound = [line for line, _ in ctx.src.bindings(receiver, scope) if line < load.lineno]
    for cast in reversed(ctx.facts.model_casts):
        if cast.node.lineno < load.lineno and cast.name == model and ctx.src.scope(cast.node) is scope:
            # a model built anew after the cast (`model = Net(config)` on meta) is not the cast one
            return (cast.node, cast.dtypes) if all(line <= cast.node.lineno for line in rebound) else None
    made = _half_default_dtype(ctx, scope, load.lineno)
    return made if made is not None and all(line > made[0].lineno for line in rebound) else None


def _cast_after(ctx: Context, model: str, load: ast.Call) -> bool:
    """A cast of the model (``model.to(dtype)``, ``.bfloat16()``) after the load, in the same scope."""
    scope = ctx.src.scope(load)
    for call in ctx.src.calls:
        func = call.func
        if call.lineno > load.lineno and isinstance(func, ast.Attribute) and func.attr in _CASTS and dotted(func.value) == model:
            if ctx.src.scope(call) is scope:
                return True
    return False


def _state_cast_to(ctx: Context, state: ast.expr, load: ast.Call, dtypes: frozenset) -> bool:
    """Is the loaded state dict cast to the model's dtype first: its last binding before the load is a dict
    comprehension of casts (``{k: v.to(torch.bfloat16) for k, v in sd.items()}``), so assign=True hands the model
    tensors of its own dtype."""
    if not isinstance(state, ast.Name):
        return False
    bound = [(line, value) for line, value in ctx.src.bindings(state, ctx.src.scope(load)) if line < load.lineno]
    if not bound:
        return False
    value = max(bound, key=lambda b: b[0])[1]
    return isinstance(value, ast.DictComp) and isinstance(value.value, ast.Call) and ctx.flow.cast_dtype(value.value) == dtypes


@code_check("AMP132", triggers=("assign=True",), also=(("load_state_dict",),))
def assign_keeps_checkpoint_dtype(ctx: Context) -> Iterator[CodeHit]:
    # llm-foundry PR #916, pytorch #108381: with assign=True the checkpoint's tensors replace the parameters,
    # dtype included, so a bf16-built model loads as fp32 from an fp32 checkpoint.
    for call in ctx.src.calls:
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr != "load_state_dict":
            continue
        assign = keyword(call, "assign")
        if not (isinstance(assign, ast.Constant) and assign.value is True) or not is_model_expr(func.value, ctx.src):
            continue
        model = dotted(func.value)
        if model is None or _cast_after(ctx, model, call):
            continue
        made = _intended_half(ctx, model, call)
        if made is None:
            continue
        node, dtypes = made
        if call.args and _state_cast_to(ctx, call.args[0], call, dtypes):
            continue
        yield call, (f"`{model}` was made {describe(dtypes)} (line {node.lineno}), but `load_state_dict(..., assign=True)` "
                     "gives it the checkpoint's tensors and their dtypes: an fp32 checkpoint makes it fp32 again; "
                     f"cast after loading (`{model}.to({'torch.bfloat16' if dtypes == frozenset({'bf16'}) else 'dtype'})`)")
