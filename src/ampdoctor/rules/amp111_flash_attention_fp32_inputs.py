"""AMP111 flash-attention-fp32-inputs: FlashAttention is called with fp32 q/k/v.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP111`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import STRICT_KERNEL_MODULES, CodeHit, Context
from ampdoctor.lint.python.dataflow import CAST_METHODS, PRESERVING
from ampdoctor.lint.python.resolve import argument, dotted, tokens

# Norms on autocast's fp32 list (CUDA): under autocast they return fp32 whatever their input.
_NORM_CLASSES = frozenset({"torch.nn.LayerNorm", "torch.nn.RMSNorm", "torch.nn.GroupNorm"})
_NORM_FUNCTIONS = frozenset({"torch.nn.functional.layer_norm", "torch.nn.functional.rms_norm", "torch.nn.functional.group_norm",
                             "torch.nn.functional.normalize"})
# What the name of an attention kernel says (`flash_attn_varlen_func`, `flash_attn_with_kvcache`).
_ATTENTION_WORDS = frozenset({"attn", "attention"})
# Methods that set the dtype: where one stands between the norm and the kernel, the value is cast (nothing to say).
_CASTS = frozenset(CAST_METHODS) | {"to", "type", "type_as"}


@code_check("AMP111", triggers=("flash_attn", "vllm"), also=(("Norm", "norm"),))
def norm_output_into_flash_attention(ctx: Context) -> Iterator[CodeHit]:
    # SimpleTuner 18590a0, a q/k norm under autocast: norms are on autocast's fp32 list, so the normed q/k reach a
    # kernel that takes one half dtype as fp32 beside a half v, and it refuses them.
    autocast = ctx.facts.mixed_precision[0] if ctx.facts.mixed_precision else ctx.project.autocast
    if autocast is None:
        return  # without autocast a norm returns its input's dtype
    norms = _norm_attributes(ctx)
    for call in ctx.src.calls:
        name = ctx.qualname(call.func) or ""
        if name.split(".")[0] not in STRICT_KERNEL_MODULES or not _ATTENTION_WORDS & tokens(name.rsplit(".", 1)[-1]):
            continue  # the package's attention kernels, not its fused norms (`flash_attn.ops.layer_norm`) or MLPs
        q, k, v = argument(call, 0, "q"), argument(call, 1, "k"), argument(call, 2, "v")
        if q is None or k is None or v is None:
            continue
        scope = ctx.src.scope(call)
        normed = [(role, n) for role, e in (("q", q), ("k", k)) if (n := _normed_by(ctx, e, scope, norms, call.lineno))]
        if not normed or _normed_by(ctx, v, scope, norms, call.lineno):
            continue
        said = " and ".join(f"{role} comes from `{norm}`" for role, norm in normed)
        where = f"line {autocast.lineno}" if isinstance(autocast, ast.AST) else autocast.describe()
        yield call, (f"{said}, which autocast ({where}) runs in fp32, while v stays half: `{ast.unparse(call.func)}` takes one "
                     "half dtype and refuses fp32 q/k; cast them back, e.g. `.to(v.dtype)`")


def _norm_attributes(ctx: Context) -> set[str]:
    """Attributes this file binds to a torch norm module (``self.q_norm = nn.RMSNorm(dim)``), by attribute name."""
    out = set()
    for node in ctx.src.assigns:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and ctx.qualname(node.value.func) in _NORM_CLASSES:
            out.update(t.attr for t in node.targets if isinstance(t, ast.Attribute))
    return out


def _normed_by(ctx: Context, expr: ast.AST | None, scope: ast.AST, norms: set[str], before: int, depth: int = 0) -> str | None:
    """The norm whose output `expr` is, through names, indexing and methods that keep an fp32 operand fp32 (the
    dataflow's `PRESERVING`: shape methods, and arithmetic, which never narrows fp32); None where a cast or anything
    else intervenes."""
    if expr is None or depth > 6:
        return None
    if isinstance(expr, ast.Subscript):
        return _normed_by(ctx, expr.value, scope, norms, before, depth + 1)
    if isinstance(expr, ast.Name):
        bound = [(line, value) for line, value in ctx.src.bindings(expr, scope) if line < before]
        return _normed_by(ctx, bound[-1][1], scope, norms, bound[-1][0], depth + 1) if bound else None
    if not isinstance(expr, ast.Call):
        return None
    func = expr.func
    if isinstance(func, ast.Attribute) and func.attr in _CASTS:
        return None
    if isinstance(func, ast.Attribute) and func.attr in PRESERVING:
        return _normed_by(ctx, func.value, scope, norms, before, depth + 1)
    if ctx.qualname(func) in _NORM_FUNCTIONS or (isinstance(func, ast.Attribute) and func.attr in norms):
        return dotted(func) or ast.unparse(func)
    return None
