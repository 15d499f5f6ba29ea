"""AMP201 implicit-dtype-promotion: An op mixes float dtypes and silently produces a dtype the policy did not ask for.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP201`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from ampdoctor.audit.evidence import Op, Phase
from ampdoctor.audit.names import dtypes_text, module_label
from ampdoctor.core.model import Location, Severity
from ampdoctor.core.registry import Hit, runtime_check
from ampdoctor.dtypes import name_of

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext



@runtime_check("AMP201")
def promotions(ctx: RuntimeContext) -> Iterator[Hit]:
    """Forward promotions of a half activation to fp32 that matter: outside autocast (nothing casts back), feeding
    an fp32 matmul, or reaching the failing op. Inside autocast most promotions are undone at the next matmul."""
    if not ctx.half_compute:
        return
    t = ctx.trace
    flagged = _promotions_that_matter(ctx)
    for (_, _, _), seqs in ctx.grouped(flagged, lambda s: (t.op_at(s).module, t.op(s), t.op_at(s).in_dtypes)).items():
        first = seqs[0]
        ins = t.float_inputs(first)
        wide = t.out_dtype(first)
        half = next(d for d, _ in ins if d in ctx.HALF)
        where = "; ".join(f"{name_of(wide)} operand from {t.describe(p, d)}" for d, p in ins if d == wide)
        yield Hit(f"{t.op(first)} mixes {dtypes_text(sorted({d for d, _ in ins}, key=str))} and returns {name_of(wide)} under "
                  f"compute={ctx.policy.compute}: {flagged[first]} ({where}; {len(seqs)} call{'s' if len(seqs) > 1 else ''})",
                  t.location(first), related=tuple(ctx.made_in(first, wide)),
                  details={"calls": len(seqs), "output": name_of(wide), "half": name_of(half)})


def _promotions_that_matter(ctx: RuntimeContext) -> dict[int, str]:
    """Promoting ops -> why it matters: outside autocast, or the promoted tensor feeds an fp32 matmul (the failing op
    itself is left to the failure's chain); not those inside an attention kernel's own math."""
    t = ctx.trace
    failing = ctx.failure.seq if ctx.failure is not None else None
    flagged: dict[int, str] = {}
    for op in ctx.promotions:
        if not op.autocast:
            flagged[op.seq] = "outside autocast, so nothing casts it back to the compute dtype"
    for op in t.ops_of(ctx.matmul_ops, Phase.FORWARD):
        if op.seq == failing or not op.out_dtypes or op.out_dtypes[0] != ctx.FP32:
            continue
        if _takes_uncast_fp32_weight(ctx, op):
            continue  # the weight's own dtype made it fp32 (AMP203's to report): a half activation could not join it
        operands = (p for p in op.producers if p is not None and p >= 0)
        src = next((found for found in map(ctx.promoted_from, operands) if found is not None), None)
        if src is not None:
            flagged.setdefault(src, f"the promoted tensor feeds an fp32 {t.op(op.seq)}")
    return {s: why for s, why in flagged.items() if not ctx.in_attention_kernel(s)}


def _takes_uncast_fp32_weight(ctx: RuntimeContext, op: Op) -> bool:
    """The matmul was handed an fp32 parameter or buffer as it is (through views): nothing cast its operands, as
    autocast does for the matmuls it knows, so the op runs in the weight's dtype (MoE experts' grouped matmul, which
    autocast has no rule for, where the caller casts the tokens to the experts' weights), whatever the activation."""
    t = ctx.trace
    return any(dt == ctx.FP32 and p is not None and (named := t.named_of(p)) is not None and named[1] is not None
               for dt, p in zip(op.in_dtypes, op.producers))


@runtime_check("AMP201")
def failing_promotion(ctx: RuntimeContext) -> Iterator[Hit]:
    """The failing op received two float dtypes and no rotary table is involved: walk the odd one back to the op
    where an activation in the compute dtype became it (a promotion or a cast)."""
    site = ctx.failure
    if site is None or len({d for d, _ in site.inputs}) < 2 or ctx.failure_is_rotary() or not ctx.failure_is_dtype_mismatch():
        return
    if ctx.unconverted_input() is not None or ctx.adapter_boundary() is not None:
        return  # the batch entered the model in another dtype than its weights (AMP131), or an adapter's (AMP127)
    t = ctx.trace
    present = {d for d, _ in site.inputs}
    compute = ctx.torch_dtype(ctx.policy.compute)
    odd = next((d for d in sorted(present, key=str) if d != compute), sorted(present, key=str)[0])
    origin_seq, operands = t.divergence([p for d, p in site.inputs if d == odd], odd, compute if compute in present else next(d for d in present if d != odd))
    origin, related, chain = _chain(ctx, odd, origin_seq, operands)
    yield Hit(f"{site.head}: {chain}", site.where, origin=origin, related=related, severity=Severity.ERROR,
              details={"odd_dtype": name_of(odd), "compute": ctx.policy.compute})


def _chain(ctx: RuntimeContext, odd: Any, origin_seq: int | None, operands: list) -> tuple[Location | None, tuple[Location, ...], str]:
    """Where the odd operand of the failing op came from, the places on the way, and the chain in words."""
    t, site = ctx.trace, ctx.failure
    assert site is not None
    if origin_seq is None:
        leaf = next((p for d, p in site.inputs if d == odd and p < 0), None)
        origin = t.leaf_location(-leaf, odd) if leaf is not None else None
        return origin, (), f"the {name_of(odd)} operand is {t.describe(leaf, odd)}" if leaf is not None else ""
    origin = t.location(origin_seq, "origin")
    related = tuple(ctx.operand_location(p, d, f"{name_of(d)} operand made here") for p, d in operands)
    made = "; ".join(f"its {name_of(d)} operand is {t.describe(p, d)}" for p, d in operands)
    kind = "cast" if t.op(origin_seq) == "aten::_to_copy" else "promotion"
    return origin, related, (f"the {name_of(odd)} operand descends from a {kind} at {t.op(origin_seq)} in {module_label(origin.module)}, "
                             f"where a {ctx.policy.compute} activation became {name_of(odd)}" + (f" ({made})" if made else ""))
