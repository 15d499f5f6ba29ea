"""The types every detector shares: a catalog `Rule`, and the `Finding` a detector reports against it."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Mapping


class Severity(str, enum.Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]

    @classmethod
    def parse(cls, text: str) -> "Severity":
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ValueError(f"unknown severity {text!r}: expected one of error, warning, info") from None


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}

# Detector kinds as the catalog lists them: registered kinds (`ampdoctor.core.registry.KINDS`) and explain.
DETECTORS = ("policy", "code", "runtime", "ranks", "numerics", "explain")


_SOURCE = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)\s*(?P<pr>PR\s*)?#(?P<number>\d+)(?:\s+\((?P<note>.+)\))?$")


@dataclass(frozen=True)
class Source:
    """An upstream report a rule was learned from: an issue or pull request of a public repository."""

    repo: str
    number: int
    pull_request: bool = False
    note: str = ""

    @classmethod
    def parse(cls, text: str) -> "Source":
        """Parse the catalog's compact form: ``owner/repo#123``, ``owner/repo PR#123`` with an optional ``(note)``."""
        match = _SOURCE.match(text.strip())
        if match is None:
            raise ValueError(f"malformed source {text!r}: expected 'owner/repo#N' or 'owner/repo PR#N'")
        return cls(match["repo"], int(match["number"]), bool(match["pr"]), match["note"] or "")

    def __str__(self) -> str:
        ref = f"{self.repo} PR #{self.number}" if self.pull_request else f"{self.repo}#{self.number}"
        return f"{ref} ({self.note})" if self.note else ref

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}/{'pull' if self.pull_request else 'issues'}/{self.number}"


@dataclass(frozen=True)
class Signature:
    """An error text that this rule explains; `pattern` is a case-insensitive regular expression whose `\\b`, `\\w`, `\\d`
    and `\\s` have their ASCII sense (`explain._FLAGS`: a Chinese report's "fp16" ends where its own characters begin).
    `unless`, when set, is one too: a text it matches shows the message coming from where it means something else,
    and the signature does not read that text. `told`: the pattern reads a failure described in words (a report's
    prose: "the EMA updates round to zero", "accumulated in bf16"), not a message that software prints or a line of
    code; such a match ranks the rule but never decides it. `doubt`, when set, is a regular expression too: a text it
    matches shows what speaks against the message's account of itself (a refusal that says the GPU lacks bf16, beside
    the runtime reporting bf16 support); the signature still reads the text and ranks its rule, but only as a guess."""

    pattern: str
    weight: float = 1.0
    unless: str = ""
    told: bool = False
    doubt: str = ""


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    severity: Severity
    summary: str
    why: str
    fix: str
    sources: tuple[Source, ...]
    incident: str = ""
    example: str = ""
    use_instead: str = ""
    signatures: tuple[Signature, ...] = ()
    # Traceback/log context that makes this rule the likelier cause of a matched error text.
    context: tuple[Signature, ...] = ()
    confirm: str = ""
    # In lint's default rule set; design-choice rules are opt-in.
    default: bool = True
    # "training": the consequence exists only while training (gradients, optimizer, loss scaling), so a finding in
    # code that never trains (inference, conversion, validation) is a note; "compute": it exists where a model runs on
    # data (training, inference), so a finding in conversion code, which loads and writes weights, is a note; "all":
    # numerics that hurt any run.
    scope: str = "all"
    # When a detector reports the rule as a note rather than at its catalog severity, and why. Kept apart from `why`
    # (the root cause explain prints and matches error texts against by wording).
    severity_note: str = ""
    # Derived from the registry by `catalog()`, never written in catalog.yaml.
    detectors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Location:
    """Where a finding points. Static detectors fill file/line/column; the runtime audit fills
    module (dotted, as in ``named_modules()``), op and phase, and file/line of the user's code."""

    file: str | None = None
    line: int | None = None
    column: int | None = None
    module: str | None = None
    op: str | None = None
    phase: str | None = None
    label: str | None = None

    def __str__(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file + (f":{self.line}" if self.line else "") + (f":{self.column}" if self.line and self.column else ""))
        if self.module is not None:
            parts.append(f"module {self.module or '<root>'}")
        if self.op:
            parts.append(f"op {self.op}")
        if self.phase:
            parts.append(self.phase)
        text = ", ".join(parts) or "<unknown>"
        return f"{text} ({self.label})" if self.label else text

    def to_dict(self) -> dict[str, Any]:
        """Every key, absent values null: consumers read one shape whatever detector made the location."""
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: Any) -> "Location":
        """The inverse of `to_dict`, strict: a mapping of exactly the known keys, each a string/int or null."""
        fields = json_object(data, cls.__dataclass_fields__, "location")
        for key, value in fields.items():
            want = int if key in ("line", "column") else str
            if value is not None and (type(value) is not want):
                raise ValueError(f"location.{key} must be {want.__name__} or null, not {type(value).__name__}")
        return cls(**fields)


def json_object(data: Any, allowed: Any, what: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """`data` as a dict when it is a JSON object whose keys are all in `allowed` and include `required` (the
    strict readers of reports that cross a process boundary); ValueError otherwise."""
    if not isinstance(data, dict):
        raise ValueError(f"{what} must be a JSON object, not {type(data).__name__}")
    unknown = sorted(set(data) - set(allowed))
    missing = [k for k in required if k not in data]
    if unknown or missing:
        raise ValueError(f"{what}: " + "; ".join(([f"unknown keys {unknown}"] if unknown else []) + ([f"missing keys {missing}"] if missing else [])))
    return dict(data)


def _text(data: dict[str, Any], key: str, what: str) -> str:
    value = data[key]
    if not isinstance(value, str):
        raise ValueError(f"{what}.{key} must be a string, not {type(value).__name__}")
    return value


_RULE_ID = re.compile(r"^AMP\d{3}$")
_FINDING_KEYS = ("id", "name", "severity", "message", "fix", "location", "origin", "related", "details")
# Written by this version; optional when read, so reports of earlier versions still read.
_FINDING_OPTIONAL = ("library",)


@dataclass(frozen=True)
class Finding:
    rule_id: str
    name: str
    severity: Severity
    message: str
    fix: str
    location: Location = field(default_factory=Location)
    origin: Location | None = None
    related: tuple[Location, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    # The installed library (its top-level package, "transformers") whose code did what the finding reports; None
    # for the user's own code. Library findings are kept apart from the user's and default to info.
    library: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.rule_id,
            "name": self.name,
            "severity": self.severity.value,
            "message": self.message,
            "fix": self.fix,
            "location": self.location.to_dict(),
            "origin": self.origin.to_dict() if self.origin is not None else None,
            "related": [loc.to_dict() for loc in self.related],
            "details": dict(self.details),
            "library": self.library,
        }
        return out

    @classmethod
    def from_dict(cls, data: Any) -> "Finding":
        """The inverse of `to_dict`, strict: every key `to_dict` writes, of the type it writes, and nothing else.
        Reports that cross a process boundary are data; anything else in them is an error, never code."""
        d = json_object(data, _FINDING_KEYS + _FINDING_OPTIONAL, "finding", _FINDING_KEYS)
        rule_id = _text(d, "id", "finding")
        if not _RULE_ID.match(rule_id):
            raise ValueError(f"finding.id {rule_id!r} is not a rule id (AMPnnn)")
        if not isinstance(d["related"], list) or not isinstance(d["details"], dict):
            raise ValueError("finding.related must be a list and finding.details an object")
        library = d.get("library")
        if library is not None and not isinstance(library, str):
            raise ValueError("finding.library must be a string or null")
        return cls(
            rule_id=rule_id,
            name=_text(d, "name", "finding"),
            severity=Severity.parse(_text(d, "severity", "finding")),
            message=_text(d, "message", "finding"),
            fix=_text(d, "fix", "finding"),
            location=Location.from_dict(d["location"]),
            origin=Location.from_dict(d["origin"]) if d["origin"] is not None else None,
            related=tuple(Location.from_dict(loc) for loc in d["related"]),
            details=d["details"],
            library=library,
        )
