"""AMP215 eager-compiled-divergence: A module gives different numbers compiled than eager under a half-precision policy, beyond what rounding its output explains.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP215`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ampdoctor.core.model import Location
from ampdoctor.core.registry import Hit, numerics_check

if TYPE_CHECKING:
    from ampdoctor.numerics.divergence import ModuleError, NumericsContext

# Unit roundoff of each compute dtype. Rounding a module's output alone moves it by at most one unit; eager and
# compiled results that differ by this many units differ in how the module computed, not in its last rounding.
UNIT_ROUNDOFF = {"bf16": 2.0**-8, "fp16": 2.0**-11}
UNITS = 4.0


@numerics_check("AMP215")
def compiled_differs(ctx: NumericsContext) -> Iterator[Hit]:
    # pytorch #159239, #168126: inductor fuses elementwise chains and keeps their intermediates in fp32, where eager
    # rounds each intermediate to bf16; the same model then trains or evaluates to different numbers.
    unit = UNIT_ROUNDOFF.get(ctx.policy.compute)
    if unit is None:
        return
    differing = [m for m in ctx.modules if m.eager_vs_compiled is not None and m.eager_vs_compiled.rel_l2 >= UNITS * unit]
    names = {m.name for m in differing}
    for m in differing:
        if any(n != m.name and (m.name == "" or n.startswith(m.name + ".")) for n in names):
            continue  # a module inside it differs already: name the innermost
        yield Hit(_message(m, ctx), Location(module=m.name, label="eager vs torch.compile on the same inputs"),
                  details={"eager_vs_compiled": m.eager_vs_compiled.rel_l2, "eager_error": m.local_error,  # type: ignore[union-attr]
                           "compiled_error": m.compiled.rel_l2 if m.compiled else None})


def _message(m: ModuleError, ctx: NumericsContext) -> str:
    diff = m.eager_vs_compiled.rel_l2  # type: ignore[union-attr]
    eager, compiled = m.local_error, (m.compiled.rel_l2 if m.compiled else None)
    text = (f"{m.type} `{m.name or '<root>'}` gives different numbers compiled than eager under compute={ctx.policy.compute}: "
            f"relative difference {diff:.3g} on the same inputs")
    if eager is not None and compiled is not None:
        closer = "compiled" if compiled < eager else "eager"
        text += (f" (against {ctx.reference}: eager {eager:.3g}, compiled {compiled:.3g}; the {closer} one keeps more of the "
                 "intermediate precision)")
    return text + "; train and evaluate in the same mode, or make the module's intermediates explicit (`.float()` and back)"
