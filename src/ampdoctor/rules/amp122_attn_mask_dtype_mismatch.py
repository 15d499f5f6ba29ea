"""AMP122 attn-mask-dtype-mismatch: An attention mask's dtype matches neither bool nor the query dtype.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP122`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.registry import Hit, runtime_check
from ampdoctor.dtypes import name_of

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


@runtime_check("AMP122")
def mask_of_another_dtype(ctx: RuntimeContext) -> Iterator[Hit]:
    """Judged at the call, with the dtypes the caller gave it: which aten ops the call becomes is the kernel's choice
    (CPU's math path, taken with dropout, casts q/k/v and the mask to fp32 itself, and the mismatch is then nowhere in
    its ops). Under autocast there is no mismatch: autocast casts the mask with q/k/v to its dtype."""
    t = ctx.trace
    for call in t.attention_calls:
        if call.start == call.end or call.autocast is not None or call.mask is None or not call.mask.is_floating_point or call.mask == call.query:
            continue
        yield Hit(f"F.scaled_dot_product_attention gets a {name_of(call.mask)} attention mask for {name_of(call.query)} queries",
                  replace(t.location(call.start), op="F.scaled_dot_product_attention"))
        return
