"""AMP131 input-dtype-mismatch: Inputs reach a layer in another dtype than its weights (fp32 batch into a half model, or the reverse).

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP131`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.model import Severity
from ampdoctor.core.registry import Hit, runtime_check
from ampdoctor.dtypes import name_of

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext


@runtime_check("AMP131")
def batch_in_another_dtype(ctx: RuntimeContext) -> Iterator[Hit]:
    """The failing op received a tensor made outside the model next to a weight of another dtype: nothing cast the
    batch where it entered a model cast to half (or a half batch entered an fp32 model), and no autocast ran the op."""
    found = ctx.unconverted_input()
    site = ctx.failure
    if found is None or site is None:
        return
    given, weight, dtype = found
    # the fix is where the inputs are handed to the module: the user's call, with the layer that refused them beside it
    call = ctx.trace.user_call(site.where.module)
    moved = call is not None and (call.file, call.line) != (site.where.file, site.where.line)
    where, related = (call, (site.where,)) if moved else (site.where, ())
    yield Hit(f"{site.head}: the {name_of(given)} operand comes from inputs that entered the model as {name_of(given)}, and "
              f"nothing inside it made them {name_of(dtype)} before they met the {name_of(dtype)} weights of {weight}; cast them where they enter the model "
              f"(`x.to({name_of(dtype)})`), or run the forward under autocast with the model kept fp32",
              where, related=related, severity=Severity.ERROR, details={"input_dtype": name_of(given), "module": weight, "weight_dtype": name_of(dtype)})
