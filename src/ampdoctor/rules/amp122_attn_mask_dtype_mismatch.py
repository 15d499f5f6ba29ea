"""AMP122 attn-mask-dtype-mismatch: An attention mask's dtype matches neither bool nor the query dtype.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP122`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.fields import FORWARD, IN_DT, IN_PROD, PHASE
from ampdoctor.core.registry import Hit, runtime_check
from ampdoctor.dtypes import name_of

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext



_SDPA = re.compile(r"aten::_?scaled_dot_product")


@runtime_check("AMP122")
def mask_of_another_dtype(ctx: RuntimeContext) -> Iterator[Hit]:
    t = ctx.trace
    for r in t.records:
        if r[PHASE] != FORWARD or not _SDPA.match(t.op(r[0])):
            continue
        floats = [d for d, p in zip(r[IN_DT], r[IN_PROD]) if p is not None]
        if len(floats) >= 4 and floats[3] != floats[0]:
            yield Hit(f"{t.op(r[0])} gets a {name_of(floats[3])} attention mask for {name_of(floats[0])} queries", t.location(r[0]))
            return
