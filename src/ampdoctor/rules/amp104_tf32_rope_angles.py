"""AMP104 tf32-rope-angles: RoPE angles are built with a matmul while fp32 matmuls are allowed to run in TF32.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP104`)."""

from __future__ import annotations

from typing import Iterator

from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import CodeHit, Context, angle_matmuls


@code_check("AMP104", triggers=("set_float32_matmul_precision", "allow_tf32"))
def tf32_rope_angles(ctx: Context) -> Iterator[CodeHit]:
    # transformers #48428: TF32 keeps 10 mantissa bits, so positions > 2048 are truncated in the angle matmul.
    where = ctx.facts.tf32_matmuls
    if where is None:
        return
    for node in angle_matmuls(ctx):
        yield node, f"RoPE angles are a matmul while TF32 is allowed for fp32 matmuls (line {where.lineno}); use an elementwise outer product"

