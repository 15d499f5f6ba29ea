"""AMP124 softmax-low-precision: Attention softmax runs in bf16/fp16 in a model cast to half precision without autocast.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP124`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import FLOAT_UP, HALF_WORDS, MATMUL_CALLS, CodeHit, Context, chain_words, in_class, in_half_module
from ampdoctor.lint.python.dataflow import describe
from ampdoctor.lint.python.resolve import keyword

SOFTMAXES = frozenset({"torch.softmax", "torch.log_softmax"})


ATTENTION_TOKENS = frozenset({"att", "attn", "attention", "scores", "score", "qk", "sim", "affinity", "attns"})


def _is_fp32(ctx: Context, expr: ast.AST) -> bool:
    dtypes = ctx.flow.tensor_dtype(expr, ctx.src.scope(expr))
    return bool(dtypes) and dtypes <= FLOAT_UP


def _has_matmul(expr: ast.AST, ctx: Context, depth: int = 0) -> bool:
    """Do the scores come from a matmul: in the expression itself (``softmax(q @ k.T)``) or through the names it
    reads, whatever they are called (``w = q @ k.T; w = w / 8; softmax(w)``)."""
    for node in ast.walk(expr):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return True
        if isinstance(node, ast.Call) and ctx.qualname(node.func) in MATMUL_CALLS:
            return True
        if depth < 3 and isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            values = [v for line, v in ctx.src.bindings(node, ctx.src.scope(node)) if v is not None and line <= node.lineno]
            if any(_has_matmul(v, ctx, depth + 1) for v in values):
                return True
    return False


def _softmax_input(ctx: Context, call: ast.Call) -> tuple[ast.AST | None, ast.AST | None]:
    """(scores, dtype argument) of a softmax call, (None, None) for any other call."""
    func = call.func
    name = ctx.qualname(func)
    if name in SOFTMAXES:
        return (call.args[0] if call.args else keyword(call, "input")), (keyword(call, "dtype") or (call.args[2] if len(call.args) > 2 else None))
    if name is None and isinstance(func, ast.Attribute) and func.attr in ("softmax", "log_softmax"):
        return func.value, keyword(call, "dtype") or (call.args[1] if len(call.args) > 1 else None)
    return None, None


# torch reduces a half softmax in fp32 and rounds once, so the output equals the fp32 softmax rounded to half.
_WHAT_IT_COSTS = ("torch reduces it in fp32 anyway and rounds only the probabilities, so this matters only where fp32 "
                  "probabilities would be used in fp32 (`dtype=torch.float32` and the product with the values in fp32)")


@code_check("AMP124", triggers=HALF_WORDS, also=(("softmax",),), project=True)
def softmax_low_precision(ctx: Context) -> Iterator[CodeHit]:
    # transformers PR #18057: attention softmax of a half model, no autocast to run it in fp32.
    if ctx.facts.local_half_model is None and ctx.project.half_model is None:
        return
    for call in ctx.src.calls:
        scores, dtype_arg = _softmax_input(ctx, call)
        if scores is None or dtype_arg is not None or _is_fp32(ctx, scores):
            continue
        if not (chain_words(scores, ctx, calls_too=False) & ATTENTION_TOKENS or _has_matmul(scores, ctx)):
            continue
        cast = in_half_module(ctx, call)
        if cast is not None:
            yield call, (f"attention softmax gets {describe(cast.dtypes)} scores: the model is cast (line {cast.node.lineno}) and no "
                         f"autocast runs softmax in fp32; {_WHAT_IT_COSTS}")
        elif in_class(ctx, call) and (project := ctx.half_model_at(call)) is not None:
            yield call, (f"attention softmax gets {describe(project.dtypes)} scores: the project runs this model as "
                         f"{project.describe()}, and no autocast runs softmax in fp32; {_WHAT_IT_COSTS}")

