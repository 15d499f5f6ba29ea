"""AMP122 attn-mask-dtype-mismatch: An attention mask's dtype matches neither bool nor the query dtype.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP122`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Phase
from ampdoctor.core.registry import Hit, runtime_check
from ampdoctor.dtypes import name_of

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext



_SDPA = re.compile(r"aten::_?scaled_dot_product")


@runtime_check("AMP122")
def mask_of_another_dtype(ctx: RuntimeContext) -> Iterator[Hit]:
    t = ctx.trace
    for op in t.ops():
        if op.phase != Phase.FORWARD or not _SDPA.match(t.op(op.seq)):
            continue
        floats = [d for d, p in zip(op.in_dtypes, op.producers) if p is not None]
        if len(floats) >= 4 and floats[3] != floats[0]:
            yield Hit(f"{t.op(op.seq)} gets a {name_of(floats[3])} attention mask for {name_of(floats[0])} queries", t.location(op.seq))
            return
