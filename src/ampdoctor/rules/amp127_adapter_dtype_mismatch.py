"""AMP127 adapter-dtype-mismatch: PEFT/LoRA adapter weights and the base model are in different dtypes outside autocast.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP127`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.dtypes import name_of
from ampdoctor.lint.python.context import PEFT_FUNCTIONS, CodeHit, Context
from ampdoctor.lint.python.dataflow import HALF, describe
from ampdoctor.lint.python.kind import TRAINS, trains_anywhere
from ampdoctor.lint.python.resolve import dotted, keyword, last_identifier, tokens

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


def _peft_wrap(call: ast.Call, ctx: Context) -> bool:
    """A model with trainable adapters: ``get_peft_model(model, config)``, or ``PeftModel.from_pretrained(base, path,
    is_trainable=...)`` / ``AutoPeftModelFor*.from_pretrained`` given `is_trainable` other than False. Loaded without
    it, PEFT freezes the adapters for inference: a cast then meets no optimizer."""
    name = ctx.qualname(call.func)
    if name in PEFT_FUNCTIONS or (name is None and isinstance(call.func, ast.Name) and call.func.id == "get_peft_model"):
        return True
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "from_pretrained":
        owner = last_identifier(func.value) or ""
        if not (owner.startswith(("PeftModel", "AutoPeftModel")) and (name is None or name.startswith("peft."))):
            return False
        trainable = keyword(call, "is_trainable")
        return trainable is not None and not (isinstance(trainable, ast.Constant) and not trainable.value)
    return False


@code_check("AMP127", triggers=("get_peft_model", "PeftModel"), also=(("bfloat16", "float16", "half()", "torch.half", "bf16", "fp16"),))
def adapter_dtype_mismatch(ctx: Context) -> Iterator[CodeHit]:
    # peft PR #1706, #2421, #971: PEFT keeps adapters fp32; casting the wrapped model afterwards casts the
    # trainable adapters too and, with kept-fp32 modules, leaves mixed dtypes that only autocast reconciles.
    if ctx.facts.mixed_precision_on:
        return  # under autocast the matmuls take mixed dtypes; a file that sets it up is left alone
    wraps: dict[tuple[str, ast.AST], ast.Call] = {}
    for call in ctx.src.calls:
        if _peft_wrap(call, ctx):
            yield from _cast_of_the_wrap(call, ctx, wraps)
    if wraps:
        yield from _later_casts(ctx, wraps)


def _scope_key(target: str, ctx: Context, node: ast.AST) -> tuple[str, ast.AST]:
    """A name is the same variable within its scope; an attribute path (`self.model`) across the file."""
    return target, ctx.src.tree if "." in target else ctx.src.scope(node)


def _cast_of_the_wrap(call: ast.Call, ctx: Context, wraps: dict[tuple[str, ast.AST], ast.Call]) -> Iterator[CodeHit]:
    """``get_peft_model(...).to(torch.bfloat16)``, or note the name the wrapped model is bound to."""
    parent = ctx.src.parents.get(call)
    if isinstance(parent, ast.Attribute):
        cast = ctx.src.parents.get(parent)
        if isinstance(cast, ast.Call) and cast.func is parent and (dtypes := _half_cast(cast, ctx)):
            yield cast, _adapter_message(dtypes, call)
    elif isinstance(parent, ast.Assign) and len(parent.targets) == 1 and (target := dotted(parent.targets[0])):
        wraps.setdefault(_scope_key(target, ctx, call), call)


def _later_casts(ctx: Context, wraps: dict[tuple[str, ast.AST], ast.Call]) -> Iterator[CodeHit]:
    """A half cast of a name bound to a PEFT-wrapped model, after the wrap, with no rebinding of the name between
    them (``model = model.merge_and_unload()`` leaves a plain model with no adapters to cast), on a path the wrap
    can be on (not ``if not args.train_text_encoder:`` after a wrap made only when it is trained)."""
    rebound = _rebindings(ctx, wraps)
    for call in ctx.src.calls:
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr not in ("to", "half", "bfloat16"):
            continue
        target = dotted(func.value)
        key = _scope_key(target, ctx, call) if target is not None else None
        wrap = wraps.get(key) if key is not None else None
        line = wrap.lineno if wrap is not None else None
        if line is None or call.lineno <= line or any(line < r < call.lineno for r in rebound.get(key, ())) \
                or ctx.src.exclusive(wrap, call):
            continue
        if (dtypes := _half_cast(call, ctx)) and not _export_cast(ctx, call, target) and not _served(ctx, target):
            yield call, _adapter_message(dtypes, line)


def _export_cast(ctx: Context, cast: ast.Call, target: str) -> bool:
    """The cast is an export: the function that holds it saves the model after it (``model.save_pretrained(path)``,
    ``torch.save(model.state_dict(), path)``) and takes no training step, so no optimizer ever meets the half
    adapters (a method that writes the weights out in fp16 after training)."""
    fn = ctx.src.enclosing_function(cast)
    if fn is None or TRAINS.search(ast.unparse(fn)):
        return False
    for call in ast.walk(fn):
        if not isinstance(call, ast.Call) or call.lineno <= cast.lineno or "save" not in tokens(last_identifier(call.func) or ""):
            continue
        func = call.func
        if isinstance(func, ast.Attribute) and dotted(func.value) == target:
            return True
        if any(dotted(n) == target for a in call.args for n in ast.walk(a) if isinstance(n, (ast.Name, ast.Attribute))):
            return True
    return False


def _served(ctx: Context, target: str) -> bool:
    """The cast model is served, not trained: the file puts it in eval mode (``self.model.eval()``) and takes no
    training step anywhere (no backward, optimizer step or trainer), so no optimizer meets the half adapters (a model
    worker that loads a trained adapter and answers requests)."""
    if trains_anywhere(ctx.src.text):
        return False
    return any(isinstance(c.func, ast.Attribute) and c.func.attr == "eval" and not c.args and dotted(c.func.value) == target
               for c in ctx.src.calls)


def _rebindings(ctx: Context, wraps: dict[tuple[str, ast.AST], ast.Call]) -> dict[tuple[str, ast.AST], list[int]]:
    """Lines where a wrapped model's name is bound to something other than a PEFT wrap."""
    out: dict[tuple[str, ast.AST], list[int]] = {}
    for node in ctx.src.assigns:
        if not isinstance(node, ast.Assign) or (isinstance(node.value, ast.Call) and _peft_wrap(node.value, ctx)):
            continue
        for t in node.targets:
            if (target := dotted(t)) is not None and (key := _scope_key(target, ctx, node)) in wraps:
                out.setdefault(key, []).append(node.lineno)
    return out


def _half_cast(call: ast.Call, ctx: Context) -> frozenset | None:
    dtypes = ctx.flow.cast_dtype(call, ctx.src.scope(call))
    return dtypes & HALF if dtypes and dtypes & HALF else None


def _adapter_message(dtypes: frozenset, wrapped: ast.AST | int) -> str:
    line = wrapped if isinstance(wrapped, int) else wrapped.lineno
    # Nothing is said of autocast: a trainer this file hands the model to may autocast (HF's with bf16=True), and the
    # adapters are trained in the cast dtype all the same, autocast casting only what the ops compute.
    return (f"the PEFT model (line {line}) is cast to {describe(dtypes)} after its adapters were added: the trainable adapters "
            f"leave fp32, and unless the optimizer keeps fp32 master weights (DeepSpeed does) their updates are rounded to "
            f"{describe(dtypes)}; load the base with `torch_dtype=` before `get_peft_model`")


@code_check("AMP127", triggers=("assign=True",), also=(("lora", "LoRA", "adapter", "peft"),))
def merged_checkpoints_assigned(ctx: Context) -> Iterator[CodeHit]:
    # Lightning-AI/litgpt PR #1246: a base checkpoint updated with a LoRA checkpoint and loaded with `assign=True`;
    # assign makes the parameters the loaded tensors, so each keeps the dtype its checkpoint was saved in (base
    # bf16, adapter fp32) whatever precision the model was built in, and the merge meets mixed dtypes.
    for call in ctx.src.calls:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "load_state_dict" and call.args and isinstance(call.args[0], ast.Name)):
            continue
        assign = keyword(call, "assign")
        if not (isinstance(assign, ast.Constant) and assign.value is True):
            continue
        scope = ctx.src.scope(call)
        merged = _checkpoint_merge(ctx, call.args[0], call, scope)
        if merged is None or _cast_after(ctx, func.value, call, scope):
            continue
        yield call, (f"`{call.args[0].id}` joins two loaded checkpoints (line {merged.lineno}) and `assign=True` keeps each tensor "
                     "in the dtype it was saved in, not the model's: a base and an adapter saved in different precisions leave "
                     "the model with mixed dtypes; load without `assign` (copies into the model's dtype) or cast the model "
                     "after loading"), Severity.WARNING


def _checkpoint_merge(ctx: Context, name: ast.Name, before: ast.AST, scope: ast.AST) -> ast.Call | None:
    """``name.update(other)`` before `before`, where both name and other are bound to checkpoint loads that do not
    fix a dtype (torch's or safetensors' `load`/`load_file`, Lightning's `lazy_load`)."""
    for call in ctx.src.calls:
        func = call.func
        if (isinstance(func, ast.Attribute) and func.attr == "update" and isinstance(func.value, ast.Name)
                and func.value.id == name.id and len(call.args) == 1 and call.lineno < before.lineno
                and ctx.src.scope(call) is scope and _loaded(ctx, func.value, call, scope) and _loaded(ctx, call.args[0], call, scope)):
            return call
    return None


def _loaded(ctx: Context, expr: ast.AST, at: ast.AST, scope: ast.AST, hops: int = 0) -> bool:
    """Is `expr` a checkpoint read from disk in whatever dtypes it was saved in (through names, ``.get(k, default)``
    and ``[k]`` of a loaded dict)?"""
    if isinstance(expr, ast.Name) and hops < 4:
        bound = [b for b in ctx.src.bindings(expr, scope) if b[0] < at.lineno and b[1] is not None]
        return bool(bound) and _loaded(ctx, bound[-1][1], at, scope, hops + 1)
    if isinstance(expr, ast.Subscript):
        return _loaded(ctx, expr.value, at, scope, hops)
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    if isinstance(func, ast.Attribute) and func.attr == "get":
        return _loaded(ctx, func.value, at, scope, hops)
    words = tokens(last_identifier(func) or "")
    return "load" in words and not words & {"state", "dict", "model", "adapter", "pretrained"} and keyword(expr, "dtype") is None


def _cast_after(ctx: Context, model: ast.AST, call: ast.Call, scope: ast.AST) -> bool:
    """A dtype cast of the same model after the load in the same scope (``model.to(dtype=...)``): one dtype again."""
    target = dotted(model)
    for other in ctx.src.calls:
        func = other.func
        if (isinstance(func, ast.Attribute) and other.lineno > call.lineno and ctx.src.scope(other) is scope
                and dotted(func.value) == target
                and (ctx.flow.cast_dtype(other, scope) is not None or (func.attr == "to" and keyword(other, "dtype") is not None))):
            return True
    return False


@runtime_check("AMP127")
def adapter_boundary_failure(ctx: RuntimeContext) -> Iterator[Hit]:
    """The step failed inside an adapter whose input the model cast (or promoted) to another dtype than the
    adapter's weights, with no autocast to reconcile them: the boundary between base model and adapter."""
    found = ctx.adapter_boundary()
    site = ctx.failure
    if found is None or site is None:
        return
    name, weight, odd, origin = found
    t = ctx.trace
    made = t.location(origin, f"made {name_of(odd)} here")
    yield Hit(f"{site.head}: the adapter {name} holds {name_of(weight)} weights and gets its input in {name_of(odd)}, made so by "
              f"{t.op(origin)} in {made.module or 'the model'}; cast the input to the adapter's dtype where it enters the adapter "
              f"(`x.to(self.{name.rpartition('.')[2]}.weight.dtype)`), keep adapter and base in one dtype, or run under autocast",
              site.where, related=(made,), severity=Severity.ERROR,
              details={"adapter": name, "weight_dtype": name_of(weight), "input_dtype": name_of(odd)})


@runtime_check("AMP127")
def adapter_buffer_left_behind(ctx: RuntimeContext) -> Iterator[Hit]:
    """The step failed inside an adapted layer where its trainable parameters' dtype met one of its buffers still in
    the frozen base's dtype (`RuntimeContext.adapter_buffer`): the adapter was upcast, its buffers were not."""
    found = ctx.adapter_buffer()
    site = ctx.failure
    if found is None or site is None:
        return
    name, weight, buffer, dtype = found
    yield Hit(f"{site.head}: the adapted layer {name} trains {name_of(weight)} parameters, but its buffer {buffer} is "
              f"{name_of(dtype)}, the dtype of the frozen base: the adapter's parameters were cast and its buffers were not; "
              f"cast the buffers with them, or cast where they meet",
              site.where, severity=Severity.ERROR,
              details={"adapter": name, "weight_dtype": name_of(weight), "buffer": buffer, "buffer_dtype": name_of(dtype)})
