"""AMP205 collective-dtype-mismatch: A collective (all-reduce, reduce-scatter) runs in a dtype other than the policy's reduce dtype.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP205`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.names import dtypes_text
from ampdoctor.core.registry import Hit, runtime_check

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext



_REDUCING_COLLECTIVES = re.compile(r"c10d::_?(allreduce|all_reduce|reduce_scatter|reduce)")


@runtime_check("AMP205")
def collectives_off_policy(ctx: RuntimeContext) -> Iterator[Hit]:
    t = ctx.trace
    if not any(_REDUCING_COLLECTIVES.match(name) for name in t.recorded()):
        return
    reduce = ctx.torch_dtype(ctx.policy.reduce)
    seen = set()
    for op in t.ops():
        name = t.op(op.seq)
        if not _REDUCING_COLLECTIVES.match(name):
            continue
        wrong = sorted({d for d, p in zip(op.in_dtypes, op.producers) if p is not None and d != reduce}, key=str)
        if wrong and (name, tuple(wrong)) not in seen:
            seen.add((name, tuple(wrong)))
            yield Hit(f"{name} reduces {dtypes_text(wrong)} tensors but the policy's reduce dtype is {ctx.policy.reduce}", t.location(op.seq))
