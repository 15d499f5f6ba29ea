"""AMP207 error-hotspot: one module adds far more error by itself than the others, measured against a float64 reference.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP207`)."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.model import Location
from ampdoctor.core.registry import Hit, numerics_check

if TYPE_CHECKING:
    from ampdoctor.numerics.divergence import NumericsContext

# Unit roundoff (half an ulp at 1.0) of each compute dtype: the error one rounding adds.
UNIT_ROUNDOFF = {"bf16": 2.0**-8, "fp16": 2.0**-11, "fp32": 2.0**-24, "fp64": 2.0**-53}
# A hotspot's local error is at least this many times the median of the other leaf modules' and of the unit roundoff.
DOMINANCE = 4.0


@numerics_check("AMP207")
def dominant_local_error(ctx: NumericsContext) -> Iterator[Hit]:
    # sglang PR #27540: a norm whose variance ran in bf16 was found by comparing layer by layer with a reference.
    ranked = ctx.hotspots()
    if len(ranked) < 2:
        return
    floor = DOMINANCE * UNIT_ROUNDOFF.get(ctx.policy.compute, 2.0**-24)
    for index, module in enumerate(ranked):
        others = [m.local_error for i, m in enumerate(ranked) if i != index]
        typical = statistics.median(others)  # type: ignore[type-var]
        local = module.local_error or 0.0
        if local < floor or local < DOMINANCE * typical:
            break  # ranked by local error: nothing further down dominates either
        yield Hit(
            f"{module.type} `{module.name or '<root>'}` adds a relative error of {local:.3g} by itself under {ctx.policy.preset_name or ctx.policy}, "
            f"{local / typical if typical else float('inf'):.0f}x the median of the other modules ({typical:.3g})",
            Location(module=module.name, label="local error against " + ctx.reference),
            details={"local_error": local, "median_local_error": typical, "forward_error": module.forward_error, "rank": index + 1},
        )
