"""AMP122 attn-mask-dtype-mismatch: An attention mask's dtype matches neither bool nor the query dtype.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP122`)."""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, code_check, runtime_check
from ampdoctor.dtypes import name_of
from ampdoctor.lint.python.context import CodeHit, Context, calls_named
from ampdoctor.lint.python.fp32 import HALF_WEIGHT_WORDS, autocast_elsewhere, fp32_made, half_weights, made_in, under_autocast
from ampdoctor.lint.python.resolve import argument

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


# --- code: the static view --------------------------------------------------------------------------------------

_SDPA = frozenset({"torch.nn.functional.scaled_dot_product_attention"})


@code_check("AMP122", triggers=("scaled_dot_product_attention",), also=(("float", "zeros", "ones", "empty", "full", "tensor", "from_numpy"),
                                                                       HALF_WEIGHT_WORDS), project=True)
def fp32_mask_into_half_attention(ctx: Context) -> Iterator[CodeHit]:
    """Inside a model whose weights are half (the file or the project casts it, or the class casts its other inputs
    to its weights' dtype), outside autocast, ``F.scaled_dot_product_attention`` gets an attention mask the code made
    fp32 (``mask.float()``, a ``torch.zeros(...)`` without dtype filled with -inf) beside queries the code leaves in
    the model's dtype: SDPA takes a float mask only in the query's dtype and refuses the pair. Under autocast the mask
    is cast with q/k/v, so a file or project that autocasts is left alone (AMP131's gates, shared)."""
    if autocast_elsewhere(ctx):
        return
    for call, _ in calls_named(ctx, _SDPA):
        mask = argument(call, 3, "attn_mask")
        query = argument(call, 0, "query")
        cls = ctx.src.enclosing_class(call)
        if mask is None or query is None or cls is None:
            continue
        scope = ctx.src.scope(call)
        made = fp32_made(ctx, mask, scope)
        if made is None or fp32_made(ctx, query, scope) is not None or under_autocast(ctx, call) or ctx.facts.expects_error(call):
            continue
        why = half_weights(ctx, cls)
        if why is None:
            continue
        yield call, (f"the attention mask `{ast.unparse(mask)[:40]}` is {made_in(made)} (line {made.lineno}) while the "
                     f"queries follow the model's half weights ({why[0]}) and no autocast runs the call: SDPA takes a float "
                     f"mask only in the query's dtype and refuses this one; make it bool, or cast it with "
                     f"`.to({ast.unparse(query)[:20]}.dtype)` before the call"), Severity.WARNING
