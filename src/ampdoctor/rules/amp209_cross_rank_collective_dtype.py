"""AMP209 cross-rank-collective-dtype: The same collective runs in different dtypes on different ranks.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP209`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Mapping

from ampdoctor.audit.rankfacts import ranks_text, split_by
from ampdoctor.core.registry import Hit, ranks_check

if TYPE_CHECKING:
    from ampdoctor.audit.rankfacts import RankFacts

# One report names the first few divergent calls; the rest are the same mistake repeated step after step.
_MAX_HITS = 5


@ranks_check("AMP209")
def collective_dtypes_differ(ranks: Mapping[int, RankFacts]) -> Iterator[Hit]:
    # Ranks meet in their collectives in call order: the n-th call of one rank is matched with the n-th of every
    # other (pytorch/pytorch#150248: NCCL reduces the bytes as whatever dtype each side says). Where the op names
    # already differ, the ranks have diverged and later calls cannot be paired.
    calls = {r: f.collectives for r, f in ranks.items() if f.collectives}
    if len(calls) < 2:
        return
    hits = 0
    for i in range(min(len(c) for c in calls.values())):
        at = {r: c[i] for r, c in calls.items()}
        if len({c.op for c in at.values()}) > 1:
            return
        same, others = split_by({r: c.dtypes for r, c in at.items()})
        for dtypes, odd in others.items():
            call = at[odd[0]]
            usual = "/".join(at[same[0]].dtypes) or "no floating-point tensors"
            yield Hit(f"collective #{i + 1} ({call.op}) runs in {'/'.join(call.dtypes) or 'no floating-point tensors'} on "  # type: ignore[arg-type]
                      f"{ranks_text(odd)} but in {usual} on {ranks_text(same)}: the ranks exchange bytes they read as different types",
                      call.location, related=(at[same[0]].location,), details={"ranks": odd, "reference_ranks": same, "call": i + 1})
            hits += 1
            if hits >= _MAX_HITS:
                return
