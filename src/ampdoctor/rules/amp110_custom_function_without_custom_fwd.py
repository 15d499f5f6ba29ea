"""AMP110 custom-function-without-custom-fwd: A custom autograd Function or extension op is not covered by autocast and receives mixed dtypes.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP110`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.facts import disables_autocast, reenters_autocast
from ampdoctor.lint.python.resolve import access_path, method


def _decorated(fn: ast.FunctionDef, ctx: Context, wanted: str) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = ctx.qualname(target) or (target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
        if name.rsplit(".", 1)[-1] == wanted:
            return True
    return False


def _disables_autocast(fn: ast.FunctionDef, ctx: Context) -> bool:
    return any(isinstance(node, ast.Call) and disables_autocast(node, ctx.src) for node in ast.walk(fn))


def _returns_its_input(fn: ast.FunctionDef) -> bool:
    """Every `return` of the forward hands back one of its arguments untouched (``return x``, x never rebound): an
    identity whose backward alone does the work (a gradient hook, a loss added through backward). No op of its
    output runs in the forward for autocast to cast, and its backward sees the gradient in the output's dtype."""
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args)[1:]}  # not `ctx`
    rebound = {t.id for node in ast.walk(fn) if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
               for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}
    returns = [node for node in ast.walk(fn) if isinstance(node, ast.Return)]
    return bool(returns) and all(isinstance(r.value, ast.Name) and r.value.id in params - rebound for r in returns)


# Ops that need their tensor operands in one dtype (a matmul or convolution of bf16 by fp32 raises; an index or
# scatter copy demands its source's dtype), where elementwise ops promote. Autocast casts them inside a Function's
# forward as anywhere else, but not in its backward, which the engine runs with autocast off.
_UNIFORM_DTYPE_OPS = frozenset({
    "matmul", "mm", "bmm", "baddbmm", "addmm", "addbmm", "addmv", "mv", "dot", "linear", "bilinear", "einsum", "tensordot",
    "chain_matmul", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "scaled_dot_product_attention", "index_put", "index_put_", "index_copy", "index_copy_", "scatter", "scatter_",
    "scatter_add", "scatter_add_", "masked_scatter", "masked_scatter_"})
# What a Function's methods may call without leaving torch's own promoting ops: the autograd context's bookkeeping,
# Python builtins, pure-Python math, and in-place methods that take no second tensor.
_CTX_BOOKKEEPING = frozenset({"save_for_backward", "mark_dirty", "mark_non_differentiable", "set_materialize_grads"})
_BUILTINS = frozenset({"len", "range", "isinstance", "min", "max", "float", "int", "bool", "tuple", "list", "dict", "set",
                       "zip", "enumerate", "any", "all", "abs", "getattr", "hasattr", "setattr", "super", "print", "round",
                       "sorted", "reversed", "type", "str"})
_OWN_INPLACE = frozenset({"requires_grad_", "detach_", "zero_", "fill_", "clamp_", "clamp_min_", "clamp_max_", "uniform_",
                          "normal_", "bernoulli_", "resize_", "unsqueeze_", "squeeze_", "t_", "transpose_"})
_PURE_MODULES = ("torch.", "math.", "operator.", "functools.", "itertools.", "numbers.", "typing.")
# In-place elementwise arithmetic casts its result into the receiver's dtype, which between floating dtypes always
# succeeds (`bf16.add_(fp32)`, `fp32.copy_(fp16)`): mixed half and fp32 operands cannot make it fail.
_CASTING_INPLACE = frozenset({"add_", "sub_", "mul_", "div_", "true_divide_", "copy_", "addcmul_", "addcdiv_", "lerp_",
                              "pow_", "masked_fill_"})


def _dtype_sensitive_op(fns: list[ast.FunctionDef], ctx: Context) -> str | None:
    """The first call in the Function's forward or backward that does not promote mixed dtypes: a matmul-like or
    index-copying op, an in-place op with a tensor operand, a kernel launch (``kernel[grid](...)``), a function of an
    imported module outside torch (an extension: ``_ext.roi_align_forward``), or code the Function is handed or
    defines elsewhere (``ctx.run_function(*args)``, a helper, a method of a module-level object), whose ops are
    unknown here; None when every op is
    torch's own elementwise kind, which promotes mixed inputs (and the engine casts each returned gradient to its
    input's dtype)."""
    for fn in fns:
        # the function's own names (its tensors); any other name a method is called on is the module's: an import
        # or a global object, such as an extension module
        local = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)} | {
            n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        casts = _casts_in(fn)
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult) and not _aligned(casts, [node.left, node.right]):
                return "@"
            if isinstance(node, ast.Call) and _call_needs_uniform_dtypes(node, ctx, local) and not _aligned(casts, node.args):
                return ast.unparse(node.func)[:40]
    return None


def _casts_in(fn: ast.FunctionDef) -> dict[str, set[str]]:
    """A name the method binds -> the names whose dtype some binding of it is cast to (``w = weight.to(x.dtype)``)."""
    casts: dict[str, set[str]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            casts.setdefault(node.targets[0].id, set()).update(_cast_to(node.value))
    return casts


def _aligned(casts: dict[str, set[str]], operands: list[ast.expr]) -> bool:
    """The method casts one tensor operand of the op to another's dtype itself (``w = weight.to(x.dtype)`` before
    ``torch.mm(x, w.t())``, or ``.type_as(x)`` in place), or every operand to one tensor's dtype: the op gets one
    dtype whatever reaches the Function. `casts`: the method's own (`_casts_in`)."""
    # each operand: its name, and the names whose dtype it is cast to (where it is bound, or in the operand itself)
    named = [(r, casts.get(r, set()) | _cast_to(op)) for op in operands for r in access_path(op)[:1]]
    roots = {r for r, _ in named}
    if len(named) < 2 or len(roots) < 2:
        return False
    # one operand cast to another's dtype, or every operand cast to the dtype of one same tensor
    return any(to & (roots - {r}) for r, to in named) or bool(set.intersection(*(to for _, to in named)))


def _cast_to(expr: ast.AST) -> set[str]:
    """The names whose dtype `expr` casts to: ``.to(x.dtype)``, ``.to(dtype=x.dtype)``, ``.type(x.dtype)``,
    ``.type_as(x)``."""
    out: set[str] = set()
    for call in (n for n in ast.walk(expr) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
        if call.func.attr in ("to", "type"):
            args = [*call.args, *(kw.value for kw in call.keywords if kw.arg == "dtype")]
            out.update(a.value.id for a in args if isinstance(a, ast.Attribute) and a.attr == "dtype" and isinstance(a.value, ast.Name))
        elif call.func.attr == "type_as":
            out.update(a.id for a in call.args if isinstance(a, ast.Name))
    return out


def _call_needs_uniform_dtypes(call: ast.Call, ctx: Context, local: set[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Subscript):
        return True  # a Triton kernel launch
    name = ctx.qualname(func)
    if name is not None:
        return name.rsplit(".", 1)[-1] in _UNIFORM_DTYPE_OPS or not name.startswith(_PURE_MODULES)
    if isinstance(func, ast.Name):
        return func.id not in _BUILTINS
    if not isinstance(func, ast.Attribute):
        return True
    receiver = func.value
    if isinstance(receiver, ast.Name) and receiver.id == "ctx":
        return func.attr not in _CTX_BOOKKEEPING
    if isinstance(receiver, ast.Name) and receiver.id not in local:
        return True  # a module's function: an extension's kernel (relative imports included)
    if func.attr in _UNIFORM_DTYPE_OPS:
        return True
    return func.attr.endswith("_") and not func.attr.endswith("__") and func.attr not in _OWN_INPLACE | _CASTING_INPLACE \
        and bool(call.args)


@code_check("AMP110", triggers=("Function",), also=(("autocast", "mixed_precision", "precision=", "bf16=", "fp16="),), project=True)
def custom_function_without_custom_fwd(ctx: Context) -> Iterator[CodeHit]:
    # pytorch #38487: autocast does not reach inside a custom Function, so its kernels see mixed dtypes.
    local = ctx.facts.half_autocast
    if local is not None:
        where = f"this file runs under autocast (line {local.lineno})"
    elif ctx.project.autocast is not None:
        where = f"the project runs it under {ctx.project.autocast.describe()}"
    else:
        return
    for cls in ctx.src.classes:
        if not any(ctx.qualname(b) == "torch.autograd.Function" for b in cls.bases):
            continue
        backward, forward = method(cls, "backward"), method(cls, "forward")
        if backward is not None and reenters_autocast(backward, ctx.src):
            continue  # the backward replays the autocast state by hand (an activation checkpoint): what custom_fwd does
        if forward is None or _decorated(forward, ctx, "custom_fwd") or _disables_autocast(forward, ctx) or _returns_its_input(forward):
            continue
        sensitive = _dtype_sensitive_op([f for f in (forward, backward) if f is not None], ctx)
        if sensitive is not None:
            yield forward, (f"`{cls.name}.forward` has no `custom_fwd` and {where}: `{sensitive}` in the Function needs "
                            "its tensors in one dtype, but what reaches it keeps whatever dtypes the ops before it left "
                            "(mixed, where those disagree), and its backward runs outside autocast")

