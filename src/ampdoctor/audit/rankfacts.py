"""What one rank of a distributed run did, as plain data that crosses process (and machine) boundaries as JSON:
the policy it was observed to run, its parameters' dtypes, and the collectives it called in order. The
cross-rank rules (detector kind ``ranks``) compare these between ranks. No torch here: the rules read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ampdoctor.core.model import Location, json_object

# A rank's ordered collective calls are kept up to this many (a step of a large FSDP model calls a few per layer).
MAX_COLLECTIVES = 2048


@dataclass(frozen=True)
class CollectiveCall:
    op: str  # "c10d::allreduce_"
    dtypes: tuple[str, ...]  # its floating-point tensor inputs' dtypes, by name ("bf16")
    location: Location = field(default_factory=Location)

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "dtypes": list(self.dtypes), "location": self.location.to_dict()}

    @classmethod
    def from_dict(cls, data: Any) -> "CollectiveCall":
        d = json_object(data, ("op", "dtypes", "location"), "collective", ("op", "dtypes", "location"))
        if not isinstance(d["op"], str) or not isinstance(d["dtypes"], list) or not all(isinstance(x, str) for x in d["dtypes"]):
            raise ValueError("collective.op must be a string and collective.dtypes a list of strings")
        return cls(d["op"], tuple(d["dtypes"]), Location.from_dict(d["location"]))


@dataclass(frozen=True)
class RankFacts:
    policy: str | None = None  # the observed policy, as `Policy` prints it
    param_dtypes: Mapping[str, str] = field(default_factory=dict)  # trainable parameter name -> dtype name
    collectives: tuple[CollectiveCall, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "param_dtypes": dict(self.param_dtypes), "collectives": [c.to_dict() for c in self.collectives]}

    @classmethod
    def from_dict(cls, data: Any) -> "RankFacts":
        keys = ("policy", "param_dtypes", "collectives")
        d = json_object(data, keys, "rank facts", keys)
        params = d["param_dtypes"]
        if d["policy"] is not None and not isinstance(d["policy"], str):
            raise ValueError("rank facts.policy must be a string or null")
        if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
            raise ValueError("rank facts.param_dtypes must map names to dtype names")
        if not isinstance(d["collectives"], list):
            raise ValueError("rank facts.collectives must be a list")
        return cls(d["policy"], params, tuple(CollectiveCall.from_dict(c) for c in d["collectives"][:MAX_COLLECTIVES]))


def split_by(values: Mapping[int, object]) -> tuple[list[int], dict[object, list[int]]]:
    """The ranks of the most common value (ties: the group of the lowest rank), and the other values' ranks."""
    groups: dict[object, list[int]] = {}
    for rank in sorted(values):
        groups.setdefault(values[rank], []).append(rank)
    reference = max(groups, key=lambda v: (len(groups[v]), -groups[v][0]))
    return groups.pop(reference), groups


def ranks_text(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"
