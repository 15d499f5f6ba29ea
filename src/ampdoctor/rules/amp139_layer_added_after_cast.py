"""AMP139 layer-added-after-cast: A layer is created or resized after the model was cast to bf16/fp16, so it stays fp32 inside a half model.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP139`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.dataflow import describe
from ampdoctor.lint.python.facts import ModelCast
from ampdoctor.lint.python.resolve import dotted, keyword

# torch.nn layers that own floating parameters (a new Dropout or ReLU has nothing to cast).
LAYERS = frozenset({
    "Linear", "Bilinear", "Embedding", "EmbeddingBag", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "LayerNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "RMSNorm", "MultiheadAttention",
    "LSTM", "GRU", "RNN", "PReLU",
})


def _new_layer(ctx: Context, value: ast.AST) -> str | None:
    """`nn.Linear(...)` without a dtype, as written (a `.to(dtype)` around it makes it a cast, not a bare layer)."""
    if not isinstance(value, ast.Call) or keyword(value, "dtype") is not None:
        return None
    name = ctx.qualname(value.func) or ""
    if name.startswith("torch.nn.") and name.rsplit(".", 1)[-1] in LAYERS:
        return name.rsplit(".", 1)[-1]
    if name == "torch.nn.Sequential":
        found = [_new_layer(ctx, arg) for arg in value.args]
        return next((f for f in found if f), None)
    return None


def _cast_again(ctx: Context, cast: ModelCast, line: int) -> bool:
    """The model, or the new layer, is cast after `line` (any dtype: a deliberate fp32 head counts as decided)."""
    assert cast.name is not None
    for call in ctx.src.calls:
        if call.lineno <= line or not isinstance(call.func, ast.Attribute):
            continue
        receiver = dotted(call.func.value) or ""
        if (receiver == cast.name or receiver.startswith(cast.name + ".")) and ctx.flow.cast_dtype(call) is not None:
            return True
    return any(c.name == cast.name and c.node.lineno > line for c in ctx.facts.model_casts)


@code_check("AMP139", triggers=("bfloat16", "float16", ".half()", "bf16", "fp16"), also=(("nn.", "torch.nn"),))
def layer_added_after_cast(ctx: Context) -> Iterator[CodeHit]:
    # transformers PR #11572/#14181: layers made after `model.to(half)` are fp32 inside a half model.
    if ctx.facts.mixed_precision_on:
        return  # autocast casts an fp32 layer's weights for its matmuls
    for cast in ctx.facts.model_casts:
        if not cast.name:
            continue
        scope = ctx.src.scope(cast.node)
        for node in ctx.src.assigns:
            if not isinstance(node, ast.Assign) or node.lineno <= cast.node.lineno or ctx.src.scope(node) is not scope:
                continue
            layer = _new_layer(ctx, node.value)
            target = dotted(node.targets[0]) if len(node.targets) == 1 else None
            if layer and target and target.startswith(cast.name + ".") and not _cast_again(ctx, cast, node.lineno):
                yield node, (f"`{target}` is a new fp32 {layer} added after `{cast.name}` was cast to {describe(cast.dtypes)} "
                             f"(line {cast.node.lineno}); cast again or create it with `dtype=`")
