"""One `Report` for every detector: findings plus optional tables (e.g. the audit's per-module dtypes)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

from ampdoctor.rules import Finding, Severity


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "columns": list(self.columns), "rows": [list(r) for r in self.rows]}


@dataclass(frozen=True)
class Series:
    """One line (or one set of bars) of a `Chart`: ``x`` numbers for a line chart, category labels for bars."""

    name: str
    x: tuple[Any, ...]
    y: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "x": list(self.x), "y": list(self.y)}


@dataclass(frozen=True)
class Chart:
    """A plot a report carries as data; renderers draw it (HTML: inline SVG) or list it (JSON).
    ``kind``: "bar" (x are labels, one bar per series and label) or "line" (x are numbers)."""

    title: str
    kind: str
    series: tuple[Series, ...]
    x_label: str = ""
    y_label: str = ""
    log_y: bool = True
    log_x: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "kind": self.kind, "x_label": self.x_label, "y_label": self.y_label, "log_y": self.log_y,
                "log_x": self.log_x, "series": [s.to_dict() for s in self.series]}


@dataclass(frozen=True)
class ReportError:
    """Something a report could not do: input a detector could not read (a config that does not parse, a
    script that does not run), a rank that sent no report, an analysis that failed. `file` names the input
    (or the part of ampdoctor) it concerns. `fatal` errors make the command exit 2; a file with a syntax error
    is not fatal as long as other files could be checked."""

    file: str
    message: str
    line: int | None = None
    column: int | None = None
    fatal: bool = True

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line else "") + (f":{self.column}" if self.line and self.column else "")
        return f"{where}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...] = ()
    tables: tuple[Table, ...] = ()
    # Files, scripts or models the detector looked at, for the summary ("checked 12 files").
    checked: tuple[str, ...] = ()
    # What the report could not do (a config that does not parse, a rank that sent nothing).
    errors: tuple[ReportError, ...] = ()
    # What the reader needs to read the findings right: the command, the policy an audit judged by and whether it
    # was given or inferred ("policy_source"), a script's failure.
    info: Mapping[str, Any] = field(default_factory=dict)
    # Plots of the numbers in the tables (error by module, error vs position), for the HTML renderer.
    charts: tuple[Chart, ...] = ()

    @classmethod
    def of(cls, findings: Iterable[Finding], **kwargs: Any) -> "Report":
        return cls(findings=tuple(sort_findings(findings)), **kwargs)

    def merge(self, other: "Report") -> "Report":
        return Report(
            findings=tuple(sort_findings(self.findings + other.findings)),
            tables=self.tables + other.tables,
            checked=self.checked + other.checked,
            errors=self.errors + other.errors,
            info={**self.info, **other.info},
            charts=self.charts + other.charts,
        )

    def with_info(self, **info: Any) -> "Report":
        return replace(self, info={**self.info, **info})

    def counts(self) -> dict[str, int]:
        counted = Counter(f.severity.value for f in self.findings)
        return {s.value: counted.get(s.value, 0) for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)}

    def at_or_above(self, severity: Severity) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity.rank >= severity.rank)

    def summary(self) -> dict[str, Any]:
        return {**self.counts(), "total": len(self.findings), "checked": len(self.checked), "input_errors": len(self.errors)}


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """The root cause of a failure first; then file, line, module; within a place, the most severe first."""

    def key(f: Finding) -> tuple[Any, ...]:
        loc = f.location
        return (not f.details.get("root_cause", False), loc.file is None, loc.file or "", loc.line or 0, loc.column or 0,
                loc.module or "", -f.severity.rank, f.rule_id)

    return sorted(findings, key=key)


def summary_line(counts: dict[str, int], checked: Sequence[str] = ()) -> str:
    parts = [f"{n} {name}{'s' if n != 1 else ''}" for name, n in counts.items() if n]
    found = ", ".join(parts) if parts else "no findings"
    return f"{found}" + (f" in {len(checked)} checked" if checked else "")


def exit_code(report: Report, fail_on: Severity = Severity.ERROR, *, program_code: int = 0) -> int:
    """The one exit code of every command (ruff's convention): a failing audited program's own code, else 2 when
    the input could not be checked (a fatal error, or every checked file unreadable), else 1 when a finding is at
    or above `fail_on`, else 0."""
    if program_code != 0:
        return program_code
    unreadable = {e.file for e in report.errors}
    if any(e.fatal for e in report.errors) or (unreadable and set(report.checked) <= unreadable):
        return 2
    return 1 if report.at_or_above(fail_on) else 0
