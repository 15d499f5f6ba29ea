"""AMP203 fp32-matmul-in-bf16-policy: Matmuls run in fp32 under a bf16 compute policy.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP203`)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterator

from ampdoctor.audit.evidence import Tag
from ampdoctor.core.registry import Hit, runtime_check

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext



# A share of the step's matmul FLOPs in fp32 below this is noise (a small head or a router).
FP32_MATMUL_SHARE = 0.01


@runtime_check("AMP203")
def fp32_matmuls(ctx: RuntimeContext) -> Iterator[Hit]:
    if not ctx.half_compute:
        return
    t = ctx.trace
    matmuls = [op for op in t.tagged(Tag.FLOPS) if op.out_dtypes]
    if not any(op.out_dtypes[0] == ctx.FP32 for op in matmuls):
        return
    total = 0
    per: dict[Any, list] = defaultdict(lambda: [0, None])
    for op in matmuls:
        n = ctx.matmul_flops(op.extra)
        total += n
        if op.out_dtypes[0] == ctx.FP32:
            entry = per[(op.module, op.phase)]
            entry[0] += n
            entry[1] = entry[1] if entry[1] is not None else op.seq
    if not total:
        return
    for _, (flops, first) in sorted(per.items(), key=lambda kv: -kv[1][0]):
        share = flops / total
        if share >= FP32_MATMUL_SHARE:
            yield Hit(f"{share:.1%} of the step's matmul FLOPs ({flops:.3g}) run in fp32 here under compute={ctx.policy.compute}",
                      t.location(first), details={"fp32_flops": flops, "share": round(share, 4), "total_flops": total})
