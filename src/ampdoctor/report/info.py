"""`ReportInfo`: what a reader needs to read a report's findings right, one named field per fact.

Its JSON form (the report's "info" object, docs/schema.md) has a key for each field that is set, in field order;
reading it back rejects a key that is not a field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

_NUMBER = (int, float)


@dataclass(frozen=True)
class RankCoverage:
    """Which ranks of a distributed audit sent their final report (`reported`) and which did not (`missing`)."""

    world_size: int
    reported: tuple[int, ...] = ()
    missing: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"world_size": self.world_size, "reported": list(self.reported), "missing": list(self.missing)}

    @classmethod
    def from_dict(cls, data: Any) -> "RankCoverage":
        if not isinstance(data, dict) or set(data) - {"world_size", "reported", "missing"} or type(data.get("world_size")) is not int:
            raise ValueError("info.ranks must be an object with world_size, reported and missing")
        lists = [data.get(k, []) for k in ("reported", "missing")]
        if not all(isinstance(v, list) and all(type(r) is int for r in v) for v in lists):
            raise ValueError("info.ranks.reported and info.ranks.missing must be lists of ranks")
        return cls(data["world_size"], tuple(lists[0]), tuple(lists[1]))


@dataclass(frozen=True)
class ReportInfo:
    """The context of a report. Every field is optional: a scalar is unset when None, a list when empty.
    Read-only mapping access (`info["notes"]`, `"notes" in info`, `info.get(...)`) reads the JSON form."""

    # compare and rope: the page's title
    title: str | None = None
    # the policy an audit or a comparison judged by, and where it came from: "given", "inferred", "default",
    # "audit-default"
    policy: str | None = None
    policy_source: str | None = None
    # compare: the reference dtype and the loss under it and under the policy; the module with the largest local error
    reference: str | None = None
    loss_reference: float | None = None
    loss_policy: float | None = None
    top_local_error: str | None = None
    # rope: the table's specification (head_dim, base, positions, scaling)
    rope: str | None = None
    # a sampled audit (--every): the optimizer steps it recorded (1-based)
    recorded_steps: tuple[int, ...] = ()
    # sentences on what was not checked (shown before the findings), and their short forms for the summary line
    notes: tuple[str, ...] = ()
    summary_caveats: tuple[str, ...] = ()
    # the summary's words when there are no findings, where "no findings" would say less than what was checked
    summary_when_clean: str | None = None
    # `ampdoctor run`: the audited script, its exit code, whether it failed, and the exception that ended it
    script: str | None = None
    script_exit_code: int | None = None
    script_failed: bool | None = None
    exception: str | None = None
    # a distributed audit: the ranks that reported; the signal that stopped the run (SIGTERM from a launcher)
    ranks: RankCoverage | None = None
    ended_by: str | None = None
    # the command that made the report
    command: str | None = None

    def __post_init__(self) -> None:
        for name in ("recorded_steps", "notes", "summary_caveats"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the fields that are set, in field order."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None or value == ():
                continue
            out[f.name] = value.to_dict() if isinstance(value, RankCoverage) else list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ReportInfo":
        """The inverse of `to_dict`, strict: a key that is not a field, or a value of the wrong type, is a ValueError."""
        if not isinstance(data, Mapping):
            raise ValueError("report.info must be an object")
        unknown = sorted(set(data) - set(_TYPES))
        if unknown:
            raise ValueError(f"report.info: unknown key {unknown[0]!r}")
        values: dict[str, Any] = {}
        for key, value in data.items():
            values[key] = _checked(key, value)
        return cls(**values)

    def merged(self, other: "ReportInfo") -> "ReportInfo":
        """This info with every field that `other` sets taken from `other`."""
        return dataclasses.replace(self, **{f.name: getattr(other, f.name) for f in dataclasses.fields(other)
                                            if getattr(other, f.name) not in (None, ())})

    # Read-only mapping access to the JSON form, for readers that think in its keys.
    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.to_dict()

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    def __bool__(self) -> bool:
        return bool(self.to_dict())

    def get(self, key: str, default: Any = None) -> Any:
        return self.to_dict().get(key, default)

    def keys(self) -> Any:
        return self.to_dict().keys()

    def items(self) -> Any:
        return self.to_dict().items()


# The JSON type of each field: a type (tuple) for scalars, "strings"/"ints" for lists, "ranks" for RankCoverage.
_TYPES: dict[str, Any] = {
    "title": str, "policy": str, "policy_source": str, "reference": str, "loss_reference": _NUMBER, "loss_policy": _NUMBER,
    "top_local_error": str, "rope": str, "recorded_steps": "ints", "notes": "strings", "summary_caveats": "strings",
    "summary_when_clean": str, "script": str, "script_exit_code": int, "script_failed": bool, "exception": str,
    "ranks": "ranks", "ended_by": str, "command": str,
}
assert set(_TYPES) == {f.name for f in dataclasses.fields(ReportInfo)}


def _checked(key: str, value: Any) -> Any:
    expected = _TYPES[key]
    if expected == "ranks":
        return RankCoverage.from_dict(value)
    if expected in ("ints", "strings"):
        item = int if expected == "ints" else str
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, item) and not isinstance(v, bool) for v in value):
            raise ValueError(f"report.info.{key} must be a list of {'integers' if item is int else 'strings'}")
        return tuple(value)
    if value is not None and (not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool)):
        raise ValueError(f"report.info.{key} has the wrong type")
    return value
