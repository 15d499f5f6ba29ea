"""AMP208 update-underflow: a share of a parameter's optimizer updates is lost when added in the params dtype.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP208`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.model import Location
from ampdoctor.core.registry import Hit, numerics_check

if TYPE_CHECKING:
    from ampdoctor.numerics.divergence import NumericsContext

# A parameter is reported when at least this share of its updated elements kept their old value.
LOST_SHARE = 0.01


@numerics_check("AMP208")
def updates_lost_in_params_dtype(ctx: NumericsContext) -> Iterator[Hit]:
    # pytorch/ao PR #1124: updates below ~1e-3 of a bf16 weight round back to the same weight.
    for update in sorted(ctx.updates, key=lambda u: -u.lost_fraction):
        if update.lost_fraction < LOST_SHARE:
            continue
        yield Hit(
            f"{update.lost_fraction:.1%} of the updates to `{update.parameter}` are lost when added to its {update.dtype} weights "
            f"(one AdamW step, lr={ctx.lr:g}): they are below half an ulp of the weight",
            Location(module=update.module, label=f"parameter {update.parameter}"),
            details={"parameter": update.parameter, "dtype": update.dtype, "lost_fraction": round(update.lost_fraction, 4),
                     "elements_updated": update.considered, "lr": ctx.lr},
        )
