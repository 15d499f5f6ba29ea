"""Checks on the AMP API itself: scalers, autocast, custom autograd functions."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.lint.python.checks import Context, Hit, calls_named, check
from ampdoctor.lint.python.dataflow import HALF, autocast_argument, describe, name_polarity
from ampdoctor.lint.python.facts import AUTOCASTS, disables_autocast
from ampdoctor.lint.python.resolve import argument, has_star_kwargs

SCALERS = frozenset({"torch.amp.GradScaler", "torch.cuda.amp.GradScaler", "torch.distributed.fsdp.ShardedGradScaler"})
DEPRECATED = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.GradScaler", "torch.cuda.amp.custom_fwd", "torch.cuda.amp.custom_bwd"})
TERMINATORS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def scaler_gate(ctx: Context, call: ast.Call, name: str) -> bool:
    """Is this scaler only active for fp16? Through ``enabled=``, or the branch/function it is created in."""
    flow, src = ctx.flow, ctx.src
    scope = src.scope(call)
    enabled = argument(call, 4 if name == "torch.cuda.amp.GradScaler" else 5, "enabled")
    if enabled is not None and flow.fp16_polarity(enabled, scope) == 1:
        return True
    child: ast.AST = call
    for parent in src.ancestors(call):
        if isinstance(parent, (ast.If, ast.IfExp)):
            sign = flow.fp16_polarity(parent.test, scope)
            in_body = child in parent.body if isinstance(parent, ast.If) else child is parent.body
            in_else = child in parent.orelse if isinstance(parent, ast.If) else child is parent.orelse
            if (in_body and sign == 1) or (in_else and sign == -1):
                return True
        elif isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And):
            before = parent.values[: parent.values.index(child)] if child in parent.values else []
            if any(flow.fp16_polarity(v, scope) == 1 for v in before):
                return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and name_polarity(parent.name) == 1:
            return True
        # `if not fp16: return None` before the scaler is created
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and child in block:
                for stmt in block[: block.index(child)]:
                    if isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[-1], TERMINATORS) and flow.fp16_polarity(stmt.test, scope) == -1:
                        return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            break
        child = parent
    return False


@check("grad-scaler-with-bf16", triggers=("GradScaler",))
def grad_scaler_with_bf16(ctx: Context) -> Iterator[Hit]:
    # Incident 4 (h2o-llmstudio #628): GradScaler() built unconditionally, then run on bf16 grads.
    evidence = None
    for call, name in calls_named(ctx, SCALERS):
        if has_star_kwargs(call) or scaler_gate(ctx, call, name):
            continue
        evidence = evidence or ctx.facts.bf16_evidence
        if evidence is None:
            return  # a plain fp16 script
        yield call, (f"`{name.rsplit('.', 1)[-1]}` is created without an fp16 gate in a file that uses bf16 "
                     f"(line {evidence.lineno}); with bf16 it fails in `unscale_` or scales for nothing")


@check("deprecated-cuda-amp", triggers=("cuda.amp", "cuda import amp"))
def deprecated_cuda_amp(ctx: Context) -> Iterator[Hit]:
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


@check("autocast-without-dtype", triggers=("autocast",))
def autocast_without_dtype(ctx: Context) -> Iterator[Hit]:
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
        yield call, "autocast without `dtype=` runs in float16 on CUDA, whatever precision the run is configured for"


def _decorated(fn: ast.FunctionDef, ctx: Context, wanted: str) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = ctx.qualname(target) or (target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
        if name.rsplit(".", 1)[-1] == wanted:
            return True
    return False


def _disables_autocast(fn: ast.FunctionDef, ctx: Context) -> bool:
    return any(isinstance(node, ast.Call) and disables_autocast(node, ctx.src) for node in ast.walk(fn))


@check("custom-function-without-custom-fwd", triggers=("Function",), also=(("autocast", "mixed_precision", "precision=", "bf16=", "fp16="),))
def custom_function_without_custom_fwd(ctx: Context) -> Iterator[Hit]:
    # B10 (pytorch #38487): autocast does not reach inside a custom Function, so its kernels see mixed dtypes.
    where = ctx.facts.half_autocast
    if where is None:
        return
    for cls in ctx.src.classes:
        if not any(ctx.qualname(b) == "torch.autograd.Function" for b in cls.bases):
            continue
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "forward":
                if not _decorated(stmt, ctx, "custom_fwd") and not _disables_autocast(stmt, ctx):
                    yield stmt, (f"`{cls.name}.forward` has no `custom_fwd` and this file runs under autocast "
                                 f"(line {where.lineno}); its inputs arrive in mixed dtypes")


@check("low-precision-reduce", triggers=("MixedPrecision",))
def low_precision_reduce(ctx: Context) -> Iterator[Hit]:
    # B18 (pytorch #106395): FSDP gradient reduction in bf16 diverges at large data parallelism.
    names = {"torch.distributed.fsdp.MixedPrecision", "torch.distributed.fsdp.MixedPrecisionPolicy"}
    for call, name in calls_named(ctx, names):
        if has_star_kwargs(call):
            continue
        scope = ctx.src.scope(call)
        reduce = argument(call, 1, "reduce_dtype")
        if reduce is not None:
            dtypes = ctx.flow.dtype_of(reduce, scope)
            if dtypes and dtypes & HALF:
                yield reduce, f"gradients are reduced in {describe(dtypes)}; use `reduce_dtype=torch.float32`"
            continue
        param = ctx.flow.dtype_of(argument(call, 0, "param_dtype"), scope)
        if param and param & HALF:
            yield call, (f"`{name.rsplit('.', 1)[-1]}` without `reduce_dtype` reduces gradients in the param dtype "
                         f"({describe(param)}); pass `reduce_dtype=torch.float32`")


@check("custom-bwd-dtype", triggers=("custom_bwd",), also=(("bfloat16", "bf16"),))
def custom_bwd_dtype(ctx: Context) -> Iterator[Hit]:
    # B9 (pytorch #87979, fixed by PR #88029 in torch 2.0): the old `torch.cuda.amp.custom_bwd` re-entered autocast
    # with its default dtype, fp16, so a bf16 forward got an fp16 backward. With `custom_fwd(cast_inputs=...)` the
    # backward ran with autocast off, and a file that also imports `torch.amp.custom_bwd` picks per torch version.
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
                                f"torch < 2.0 although this file uses bf16 (line {evidence.lineno}); use "
                                "`torch.amp.custom_bwd(device_type=\"cuda\")`")
