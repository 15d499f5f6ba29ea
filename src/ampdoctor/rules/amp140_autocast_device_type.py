"""AMP140 autocast-device-type: autocast is given a `torch.device` where it takes a device-type string, CUDA's
autocast state is read for code that runs on another device, or a model's fp32 region is pinned to CUDA.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP140`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import CodeHit, Context, calls_named, in_class
from ampdoctor.lint.python.dataflow import autocast_argument
from ampdoctor.lint.python.project import cpu_autocast_line, other_device_line
from ampdoctor.lint.python.resolve import dotted

# What reads autocast's state or dtype for a device other than CUDA (or for whichever device a tensor is on).
_CPU_STATE = frozenset({"torch.get_autocast_cpu_dtype", "torch.is_autocast_cpu_enabled"})
_ANY_DEVICE_STATE = frozenset({"torch.get_autocast_dtype", "torch.is_autocast_enabled"})
# A script's settings (argparse's namespace, a config object, hyperparameters): their `.device` is what was typed
# ("cuda"), a string. HF's `TrainingArguments.device` is a torch.device, and its usual names are not these.
_SETTINGS = frozenset({"args", "opt", "opts", "options", "cfg", "config", "conf", "hparams", "params", "settings", "flags", "FLAGS"})
# Tensor methods and torch functions that autocast does not govern: views, shape changes, copies and elementwise
# arithmetic, whose result dtype type promotion decides on every device. A region made only of these is the same
# with or without autocast, so pinning it to CUDA loses nothing anywhere.
_UNGOVERNED = frozenset({"view", "view_as", "reshape", "chunk", "split", "squeeze", "unsqueeze", "flatten", "unflatten",
                         "permute", "transpose", "contiguous", "expand", "expand_as", "repeat", "narrow", "size", "dim",
                         "clone", "detach", "float", "double", "to", "type_as", "add", "sub", "mul", "div", "add_",
                         "sub_", "mul_", "div_", "neg", "cat", "stack"})


@code_check("AMP140", triggers=("autocast",), also=(("device",),))
def device_object_as_device_type(ctx: Context) -> Iterator[CodeHit]:
    # llm-foundry PR#302: `torch.autocast(model.device, dtype)`; autocast takes the device *type*, a string, and
    # raises "Expected `device_type` of type `str`" on a torch.device.
    for call, _ in calls_named(ctx, frozenset({"torch.autocast"})):
        arg = autocast_argument(call, "torch.autocast", "device_type")
        made = _device_object(ctx, arg, ctx.src.scope(call))
        if made is not None:
            yield arg, (f"`{ast.unparse(arg)}` is a `torch.device` ({made}), but autocast takes the device type as a "
                        f"string and raises a TypeError on it: pass `{ast.unparse(arg)}.type`")


@code_check("AMP140", triggers=("autocast",), also=(("float32", "torch.float"),), project=True)
def fp32_region_pinned_to_cuda(ctx: Context) -> Iterator[CodeHit]:
    # diffusers PR#12814: a model's forward decorated `@torch.autocast(device_type="cuda", dtype=torch.float32)` to
    # keep its time embedding in fp32. Autocast state is per device type: under CPU, MPS or XPU autocast this
    # region changes nothing, and the embedding runs in the half dtype of the weights or of the ambient autocast.
    # That happens where the code is run on such a device: said as a warning where this file or another of its
    # project picks one, as a note where nothing linted does (the region then holds wherever the code is run).
    elsewhere, asked = None, False
    for call, _ in calls_named(ctx, frozenset({"torch.autocast"})):
        device = autocast_argument(call, "torch.autocast", "device_type")
        dtype = autocast_argument(call, "torch.autocast", "dtype")
        if not (_is_cuda(device) and dtype is not None and ctx.qualname(dtype) in ("torch.float32", "torch.float")):
            continue
        if in_class(ctx, call) and not _cuda_branch(ctx, call) and _governs(_region(ctx, call)):  # model code, run on any device
            if not asked:
                elsewhere, asked = _runs_elsewhere(ctx), True
            said = ("an fp32 autocast region pinned to CUDA: on any other device (CPU, MPS, XPU) it changes nothing, and "
                    "this code runs in the half dtype of the weights or of that device's autocast")
            fix = "cast explicitly (`.float()`, or keep the module in fp32) or take the device type from the input"
            if elsewhere:
                yield call, f"{said}, and this project {elsewhere}; {fix}"
            else:
                yield call, (f"{said}; nothing linted here runs on another device, so this holds where it runs now. "
                             f"To make it hold on any device, {fix}"), Severity.INFO


def _runs_elsewhere(ctx: Context) -> str | None:
    """Where this code is run on a device other than CUDA: the device this file picks, or the nearest other file of
    its project that picks one (`ProjectContext.other_device`), said with its place; None where none does."""
    own = other_device_line(ctx.src.text)
    if own is not None:
        return f"runs on {own[0]} (line {own[1]})"
    line = cpu_autocast_line(ctx.src.text)
    if line is not None:
        return f"enters autocast on the CPU (line {line})"
    return ctx.project.other_device.describe() if ctx.project.other_device else None


def _region(ctx: Context, call: ast.Call) -> list[ast.stmt]:
    """The statements an autocast call covers: the body of its ``with`` or of the function it decorates; empty
    (unknown) where the call is used some other way."""
    parents = list(ctx.src.ancestors(call))[:2]
    if parents and isinstance(parents[0], (ast.FunctionDef, ast.AsyncFunctionDef)) and call in parents[0].decorator_list:
        return parents[0].body
    if len(parents) == 2 and isinstance(parents[0], ast.withitem) and isinstance(parents[1], (ast.With, ast.AsyncWith)):
        return parents[1].body
    return []


def _governs(region: list[ast.stmt]) -> bool:
    """Does the region run an op autocast casts: a matmul (``@``), or any call but the views and elementwise
    arithmetic of `_UNGOVERNED` (a module's or function's call may hold a matmul). An empty region is unknown."""
    if not region:
        return True
    for node in (n for stmt in region for n in ast.walk(stmt)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return True
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Attribute) and node.func.attr in _UNGOVERNED):
            return True
    return False


def _cuda_branch(ctx: Context, node: ast.AST) -> bool:
    """Does `node` run only for CUDA tensors: in the body of ``if x.device.type == "cuda"`` (or ``x.is_cuda``), the
    ``else`` of the opposite test, or after ``if not x.is_cuda: return ...``?"""
    for parent, child in ctx.src.steps(node):
        if isinstance(parent, ast.If) and child is not parent.test:
            if _cuda_test(parent.test) is (child in parent.body):
                return True
        block = ctx.src.block_of(child) if isinstance(child, ast.stmt) else None
        for before in (block[:block.index(child)] if block else ()):
            if isinstance(before, ast.If) and _cuda_test(before.test) is False and before.body \
                    and isinstance(before.body[-1], (ast.Return, ast.Raise)):
                return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
    return False


def _cuda_test(test: ast.expr) -> bool | None:
    """True for a test that a tensor is on CUDA (``x.is_cuda``, ``x.device.type == "cuda"``), False for its negation,
    None for any other test."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _cuda_test(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.Attribute) and test.attr == "is_cuda":
        return True
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq)):
        sides = (test.left, test.comparators[0])
        if any(_device_type(s) for s in sides) and any(_is_cuda(s) for s in sides):
            return isinstance(test.ops[0], ast.Eq)
    return None


def _device_object(ctx: Context, expr: ast.expr | None, scope: ast.AST, depth: int = 0) -> str | None:
    """How `expr` is a torch.device: ``torch.device(...)``, the ``.device`` of a tensor or module, or a name bound
    only to those. ``self.device`` counts only where the file binds it to one (a precision plugin's
    ``self.device`` is often the type string)."""
    if expr is None or depth > 3:
        return None
    if isinstance(expr, ast.Call) and ctx.qualname(expr.func) == "torch.device":
        return "made by `torch.device(...)`"
    if isinstance(expr, ast.Attribute) and expr.attr == "device":
        if not (isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls")) and not _settings(expr.value):
            return "a tensor's or module's `.device`"
    if isinstance(expr, (ast.Name, ast.Attribute)):
        bound = ctx.src.bindings(expr, scope)
        made = [_device_object(ctx, value, scope, depth + 1) for _, value in bound]
        if made and all(made):
            return f"bound at line {bound[0][0]} to {made[0].removeprefix('made by ')}"
    return None


@code_check("AMP140", triggers=("is_autocast_enabled",), also=(("cpu", "get_autocast_dtype"),), project=True)
def cuda_state_guards_other_devices(ctx: Context) -> Iterator[CodeHit]:
    # OLMo PR#339 (pytorch#110966): `torch.is_autocast_enabled()` without an argument is CUDA's state only; under
    # CPU autocast it is False, so the CPU branch it guards (`get_autocast_cpu_dtype()`) never runs. That matters
    # where the code is run under CPU autocast: the file or another of its project (OLMo's tests) enters it. A
    # project that autocasts on CUDA only never reaches the dead branch (composer's precision contexts).
    line = cpu_autocast_line(ctx.src.text)
    entered = (f"autocast entered on the CPU at line {line}" if line is not None
               else ctx.project.cpu_autocast.describe() if ctx.project.cpu_autocast else None)
    if entered is None:
        return
    for call, _ in calls_named(ctx, frozenset({"torch.is_autocast_enabled"})):
        if call.args or call.keywords:
            continue
        guarded = _guarded(ctx, call)
        if guarded is None:
            continue
        other = _other_device_read(ctx, guarded)
        if other is not None:
            node, what = other
            yield call, (f"`torch.is_autocast_enabled()` without a device reads CUDA's autocast state only, so {what} "
                         f"(line {node.lineno}), which it guards, never runs under CPU autocast, which this code meets: "
                         f"{entered}; use `torch.is_autocast_enabled(x.device.type)` (torch>=2.4) or also test "
                         "`torch.is_autocast_cpu_enabled()`")


def _guarded(ctx: Context, call: ast.Call) -> list[ast.AST] | None:
    """The statements that run only when `call` is true: the body of ``if <call>`` (the call alone, or a conjunct
    of an ``and``), or what follows ``if not <call>: return``. None where another term could make the test true
    (``or``) or the call is used some other way."""
    node: ast.AST = call
    negated = False
    for parent in ctx.src.ancestors(call):
        if isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And) and not negated:
            node = parent
            continue
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not) and not negated:
            negated, node = True, parent
            continue
        if isinstance(parent, (ast.If, ast.IfExp)) and parent.test is node:
            if not negated:
                return list(parent.body) if isinstance(parent, ast.If) else [parent.body]
            if isinstance(parent, ast.If) and parent.body and isinstance(parent.body[-1], (ast.Return, ast.Raise)):
                block = ctx.src.block_of(parent)
                return block[block.index(parent) + 1:] if block else None
        return None
    return None


def _other_device_read(ctx: Context, guarded: list[ast.AST]) -> tuple[ast.AST, str] | None:
    """Code among `guarded` written for a device other than CUDA: CPU autocast's dtype or state, autocast's dtype
    for a device given by a tensor, or a test of a tensor's device against a non-CUDA type."""
    for stmt in guarded:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                name = ctx.qualname(node.func)
                if name in _CPU_STATE or (name in _ANY_DEVICE_STATE and node.args and not _is_cuda(node.args[0])):
                    return node, f"`{ast.unparse(node)}`"
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.In)):
                sides = (node.left, node.comparators[0])
                if any(_device_type(s) for s in sides) and any(_non_cuda_literal(s) for s in sides):
                    return node, f"the `{ast.unparse(node)}` branch"
    return None


def _settings(expr: ast.expr) -> bool:
    """``args``, ``cfg``, ``self.config``, or a section of one (``cfg.training``): an object of settings, whose
    ``.device`` is the type string it was given."""
    while isinstance(expr, ast.Attribute):
        if expr.attr in _SETTINGS:
            return True
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id in _SETTINGS


def _is_cuda(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value == "cuda"


def _device_type(expr: ast.expr) -> bool:
    """``x.device.type`` or ``x.device``: what a device test compares."""
    chain = dotted(expr) or ""
    return chain.endswith(".device.type") or chain.endswith(".device") or chain in ("device_type",)


def _non_cuda_literal(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value not in ("cuda", "meta")
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return any(_non_cuda_literal(e) for e in expr.elts)
    return False
