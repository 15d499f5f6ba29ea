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

# Detector kinds as the catalog lists them: registered kinds (`ampdoctor.rules.registry.KINDS`) and explain.
DETECTORS = ("policy", "code", "runtime", "numerics", "explain")


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
    """An error text that this rule explains; `pattern` is a case-insensitive regular expression."""

    pattern: str
    weight: float = 1.0


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
        }
        return out
