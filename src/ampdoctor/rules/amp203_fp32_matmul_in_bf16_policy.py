"""AMP203 fp32-matmul-in-bf16-policy: Matmuls run in fp32 under a bf16 compute policy.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP203`)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterator

from ampdoctor.audit.evidence import Tag
from ampdoctor.core.registry import Hit, runtime_check

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext



# A share of the step's matmul FLOPs in fp32 below this is noise (a small head or a router), unless it is the output
# head: its share grows with the vocabulary, and at a real one is a large part of the step.
FP32_MATMUL_SHARE = 0.01
# How far back from the loss the output head is looked for (casts, views, a softcap, log_softmax, the loss ops).
_HEAD_DEPTH = 64


def _output_heads(ctx: RuntimeContext) -> set[int]:
    """The output heads: the forward matmuls the losses are computed from (back from each loss backward starts at,
    along every op's first float operand: the main term of `ce + coef * aux`, the logits of
    `nll_loss(log_softmax(logits))`, to the first matmul) that widen their input to a vocabulary. A head onto a few
    classes or a score stays a negligible share at any model size."""
    t = ctx.trace
    heads = set()
    for seed in t.tagged(Tag.LOSS):
        prod = seed.extra[1]
        for _ in range(_HEAD_DEPTH):
            if prod is None or prod < 0:
                break
            op = t.op_at(prod)
            if op.func_id in ctx.matmul_ops:
                if _widens(ctx, op.extra):
                    heads.add(prod)
                break
            prod = next((p for _, p in t.float_inputs(prod)), None)
    return heads


def _widens(ctx: RuntimeContext, extra: tuple) -> bool:
    """A matmul whose output features are at least the size it contracts (FLOPs are 2 * output elements * that)."""
    out = extra[-1] if extra else None
    if not out or not isinstance(out, tuple) or not all(isinstance(n, int) for n in out):
        return False
    elements = math.prod(out)
    return bool(elements) and out[-1] * 2 * elements >= ctx.matmul_flops(extra)


@runtime_check("AMP203")
def fp32_matmuls(ctx: RuntimeContext) -> Iterator[Hit]:
    """fp32 matmuls by module, as a share of the step's matmul FLOPs. Not the caller's: the fp32 ops an attention
    kernel runs on half q/k/v (CPU's math path upcasts them itself, `calls`)."""
    if not ctx.half_compute:
        return
    t = ctx.trace
    matmuls = [op for op in t.tagged(Tag.FLOPS) if op.out_dtypes]
    if not any(op.out_dtypes[0] == ctx.FP32 for op in matmuls):
        return
    heads = _output_heads(ctx)
    total = 0
    per: dict[Any, list] = defaultdict(lambda: [0, None, False])
    for op in matmuls:
        n = ctx.matmul_flops(op.extra)
        total += n
        if op.out_dtypes[0] != ctx.FP32:
            continue
        if ctx.in_attention_kernel(op.seq):
            continue
        entry = per[(op.module, op.phase)]
        entry[0] += n
        entry[1] = entry[1] if entry[1] is not None else op.seq
        entry[2] = entry[2] or op.seq in heads
    if not total:
        return
    for _, (flops, first, head) in sorted(per.items(), key=lambda kv: -kv[1][0]):
        share = flops / total
        if share >= FP32_MATMUL_SHARE or (head and flops):
            what = "; the output head, whose result the loss is computed from" if head else ""
            yield Hit(f"{share:.1%} of the step's matmul FLOPs ({flops:.3g}) run in fp32 here under compute={ctx.policy.compute}{what}",
                      t.location(first), details={"fp32_flops": flops, "share": round(share, 4), "total_flops": total, "output_head": head})
