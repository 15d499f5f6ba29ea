"""AMP132 checkpoint-dtype: `load_state_dict(..., assign=True)` gives a half-precision model the checkpoint's dtypes.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP132`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.dataflow import HALF, describe
from ampdoctor.lint.python.facts import is_model_expr
from ampdoctor.lint.python.resolve import dotted, keyword, last_identifier

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
    """Is the loaded state dict in the model's dtype already, so that assign=True hands the model tensors of its own
    dtype: its last binding before the load is a dict comprehension of casts (``{k: v.to(torch.bfloat16) for k, v in
    sd.items()}``) or the state dict of a model cast to that dtype (``other.to(torch.bfloat16).state_dict()``), or
    its entries are written as casts after it (``for k in sd: sd[k] = sd[k].to(torch.bfloat16)``)."""
    if not isinstance(state, ast.Name):
        return False
    scope = ctx.src.scope(load)
    bound = [(line, value) for line, value in ctx.src.bindings(state, scope) if line < load.lineno]
    if not bound:
        return False
    line, value = max(bound, key=lambda b: b[0])
    if isinstance(value, ast.DictComp) and isinstance(value.value, ast.Call) and ctx.flow.cast_dtype(value.value) == dtypes:
        return True
    return _state_dict_of_cast_model(ctx, value, load, dtypes) or _entries_cast(ctx, state.id, value, (line, load.lineno), dtypes)


def _state_dict_of_cast_model(ctx: Context, value: ast.AST | None, load: ast.Call, dtypes: frozenset) -> bool:
    """``m.to(dtype).state_dict()``, or ``m.state_dict()`` of a model `m` cast to `dtypes` earlier in the load's scope."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "state_dict"):
        return False
    owner = value.func.value
    if isinstance(owner, ast.Call) and ctx.flow.cast_dtype(owner, ctx.src.scope(load)) == dtypes:
        return True
    name = dotted(owner)
    scope = ctx.src.scope(load)
    return name is not None and any(c.name == name and c.dtypes == dtypes and c.node.lineno < value.lineno
                                    and ctx.src.scope(c.node) is scope for c in ctx.facts.model_casts)


def _entries_cast(ctx: Context, name: str, value: ast.AST | None, between: tuple[int, int], dtypes: frozenset) -> bool:
    """Every entry written into the dict `name` between its binding and the load is a cast to `dtypes` (``sd[k] =
    v.to(torch.bfloat16)``), and they are all of its entries: the dict starts empty, or the writes run in a loop
    (over its keys)."""
    first, last = between
    writes = [node for node in ctx.src.assigns if isinstance(node, ast.Assign) and first < node.lineno < last
              and any(isinstance(t, ast.Subscript) and dotted(t.value) == name for t in node.targets)]
    if not writes or not all(isinstance(w.value, ast.Call) and ctx.flow.cast_dtype(w.value) == dtypes for w in writes):
        return False
    empty = (isinstance(value, ast.Dict) and not value.keys) or (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict" and not value.args and not value.keywords)
    return empty or any(isinstance(p, (ast.For, ast.AsyncFor)) for w in writes for p in ctx.src.ancestors(w))


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
        said = (f"`{model}` was made {describe(dtypes)} (line {node.lineno}), but `load_state_dict(..., assign=True)` "
                "gives it the checkpoint's tensors and their dtypes: an fp32 checkpoint makes it fp32 again; "
                f"cast after loading (`{model}.to({'torch.bfloat16' if dtypes == frozenset({'bf16'}) else 'dtype'})`)")
        download = _downloaded(ctx, call.args[0], call) if call.args else None
        if download is not None:
            # A published checkpoint's dtype is its publisher's choice, which the code does not show: the model may
            # well load in the dtype it was made for. What the project saves itself (an FSDP run's fp32 shards) it does.
            yield call, (f"{said} (the checkpoint is downloaded, line {download.lineno}: its dtype is the one it was "
                         "published in, which the code does not show)"), Severity.INFO
            continue
        yield call, said


_DOWNLOADS = frozenset({"hf_hub_download", "snapshot_download", "cached_download", "load_state_dict_from_url", "cached_path"})


def _downloaded(ctx: Context, state: ast.expr, load: ast.Call, hops: int = 0) -> ast.Call | None:
    """The download the state dict is read from: ``sd = load_file(path)`` (or ``torch.load``) with `path` bound, on some
    path through the function, to ``hf_hub_download(...)``; or the state dict fetched by URL itself
    (``load_state_dict_from_url(url)``). Names are followed back a few bindings."""
    if isinstance(state, ast.Call):
        if (last_identifier(state.func) or "") in _DOWNLOADS:
            return state
        return _downloaded(ctx, state.args[0], load, hops + 1) if state.args and hops < 3 and \
            "load" in (last_identifier(state.func) or "") else None
    if not isinstance(state, ast.Name) or hops >= 3:
        return None
    scope = ctx.src.scope(load)
    for line, value in ctx.src.bindings(state, scope):
        if line < load.lineno and value is not None and (found := _downloaded(ctx, value, load, hops + 1)) is not None:
            return found
    return None
