"""AMP210 cross-rank-precision-mismatch: Ranks of one job run different precision policies or parameter dtypes.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP210`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Mapping

from ampdoctor.audit.rankfacts import ranks_text, split_by
from ampdoctor.core.model import Location
from ampdoctor.core.registry import Hit, ranks_check

if TYPE_CHECKING:
    from ampdoctor.audit.rankfacts import RankFacts

# Parameters named in one message; the count says how many more.
_NAMED = 3


@ranks_check("AMP210")
def ranks_differ_in_precision(ranks: Mapping[int, RankFacts]) -> Iterator[Hit]:
    # A rank-dependent code path (a dtype inferred from data, a model loaded differently on rank 0) makes ranks train
    # different models; the collectives then mix dtypes (modelscope/ms-swift#3830) or average unlike numbers.
    policies = {r: f.policy for r, f in ranks.items() if f.policy is not None}
    if len(set(policies.values())) > 1:
        same, others = split_by(policies)
        for policy, odd in others.items():
            yield Hit(f"{ranks_text(odd)} ran policy {policy} but {ranks_text(same)} ran {policies[same[0]]}",
                      Location(module="", label="observed policy"), details={"ranks": odd, "reference_ranks": same})
    yield from _param_dtypes_differ(ranks)


def _param_dtypes_differ(ranks: Mapping[int, RankFacts]) -> Iterator[Hit]:
    names = sorted(set().union(*(f.param_dtypes for f in ranks.values()))) if ranks else []
    differing: dict[tuple, list[str]] = {}  # (odd ranks, their dtype, reference dtype) -> parameter names
    for name in names:
        seen = {r: f.param_dtypes[name] for r, f in ranks.items() if name in f.param_dtypes}
        if len(set(seen.values())) < 2:
            continue
        same, others = split_by(seen)
        for dtype, odd in others.items():
            differing.setdefault((tuple(odd), dtype, seen[same[0]], tuple(same)), []).append(name)
    for (odd, dtype, usual, same), params in differing.items():
        shown = ", ".join(f"`{p}`" for p in params[:_NAMED]) + (f" and {len(params) - _NAMED} more" if len(params) > _NAMED else "")
        yield Hit(f"{len(params)} parameter{'s' if len(params) > 1 else ''} ({shown}) {'are' if len(params) > 1 else 'is'} {dtype} "
                  f"on {ranks_text(list(odd))} but {usual} on {ranks_text(list(same))}",
                  Location(module=params[0].rsplit(".", 1)[0] if "." in params[0] else ""),
                  details={"ranks": list(odd), "reference_ranks": list(same), "parameters": len(params)})
