"""One `Report` for every detector: findings plus optional tables (e.g. the audit's per-module dtypes)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Iterable, Sequence

from ampdoctor.core import Finding, Location, Severity
from ampdoctor.core.model import json_object
from ampdoctor.report.info import ReportInfo


def _strings(data: Any, what: str) -> tuple[str, ...]:
    if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
        raise ValueError(f"{what} must be a list of strings")
    return tuple(data)


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "columns": list(self.columns), "rows": [list(r) for r in self.rows]}

    @classmethod
    def from_dict(cls, data: Any) -> "Table":
        d = json_object(data, ("title", "columns", "rows"), "table", ("title", "columns", "rows"))
        if not isinstance(d["title"], str) or not isinstance(d["rows"], list):
            raise ValueError("table.title must be a string and table.rows a list")
        return cls(d["title"], _strings(d["columns"], "table.columns"), tuple(_strings(r, "table row") for r in d["rows"]))


@dataclass(frozen=True)
class Series:
    """One line (or one set of bars) of a `Chart`: ``x`` numbers for a line chart, category labels for bars."""

    name: str
    x: tuple[Any, ...]
    y: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "x": list(self.x), "y": list(self.y)}

    @classmethod
    def from_dict(cls, data: Any) -> "Series":
        d = json_object(data, ("name", "x", "y"), "series", ("name", "x", "y"))
        x, y = d["x"], d["y"]
        if not isinstance(d["name"], str) or not isinstance(x, list) or not isinstance(y, list) or len(x) != len(y):
            raise ValueError("series.name must be a string and series.x, series.y lists of one length")
        if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in x):
            raise ValueError("series.x must hold numbers or labels")
        if not all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in y):
            raise ValueError("series.y must hold numbers")
        return cls(d["name"], tuple(x), tuple(y))


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

    @classmethod
    def from_dict(cls, data: Any) -> "Chart":
        keys = ("title", "kind", "x_label", "y_label", "log_y", "log_x", "series")
        d = json_object(data, keys, "chart", ("title", "kind", "series"))
        if d["kind"] not in ("bar", "line") or not isinstance(d["series"], list):
            raise ValueError('chart.kind must be "bar" or "line" and chart.series a list')
        if not all(isinstance(d.get(k, ""), str) for k in ("title", "x_label", "y_label")):
            raise ValueError("chart.title and its axis labels must be strings")
        if not all(type(d.get(k, False)) is bool for k in ("log_y", "log_x")):
            raise ValueError("chart.log_y and chart.log_x must be booleans")
        return cls(d["title"], d["kind"], tuple(Series.from_dict(s) for s in d["series"]), d.get("x_label", ""),
                   d.get("y_label", ""), d.get("log_y", True), d.get("log_x", False))


class ErrorKind(str, Enum):
    """What kind of trouble a `ReportError` is, set where it is raised, so that callers classify errors by kind and
    never by the words of the message. Not part of the JSON document (a report read back has kind "input")."""

    INPUT = "input"  # an input ampdoctor could not check (a config it cannot interpret, a value out of range)
    UNREADABLE = "unreadable"  # a file that could not be read at all (missing, no permission, not text)
    SYNTAX = "syntax"  # a source file that does not parse
    NEWER_SYNTAX = "newer-syntax"  # a source file in syntax of a newer Python than this one: fine, but not checked here
    NOT_A_CONFIG = "not-a-config"  # an empty file or a template whose placeholders are filled in before it is read: a note
    RANK = "rank"  # a rank of a distributed run that sent no (usable) report, or whose script failed
    INTERNAL = "internal"  # ampdoctor itself failed (an analysis that raised)


@dataclass(frozen=True)
class ReportError:
    """Something a report could not do: input a detector could not read (a config that does not parse, a
    script that does not run), a rank that sent no report, an analysis that failed. `file` names the input
    (or the part of ampdoctor) it concerns. `fatal` errors make the command exit 2: input that could not be read
    or that its framework would refuse (the other files are still checked and reported, as ruff does). Not fatal:
    what is only left unchecked (a file in a newer Python's syntax, a template, a rank that sent no report).
    `kind` says which of these it is."""

    file: str
    message: str
    line: int | None = None
    column: int | None = None
    fatal: bool = True
    kind: ErrorKind = ErrorKind.INPUT

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line else "") + (f":{self.column}" if self.line and self.column else "")
        return f"{where}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        out = {"file": self.file, "message": self.message, "line": self.line, "column": self.column, "fatal": self.fatal}
        return {k: v for k, v in out.items() if v is not None}

    @classmethod
    def from_dict(cls, data: Any) -> "ReportError":
        d = json_object(data, ("file", "message", "line", "column", "fatal"), "error", ("file", "message"))
        if not isinstance(d["file"], str) or not isinstance(d["message"], str):
            raise ValueError("error.file and error.message must be strings")
        for key in ("line", "column"):
            if d.get(key) is not None and type(d[key]) is not int:
                raise ValueError(f"error.{key} must be an integer")
        if type(d.get("fatal", True)) is not bool:
            raise ValueError("error.fatal must be true or false")
        return cls(d["file"], d["message"], d.get("line"), d.get("column"), d.get("fatal", True))


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...] = ()
    tables: tuple[Table, ...] = ()
    # Files, scripts or models the detector looked at, for the summary ("checked 12 files").
    checked: tuple[str, ...] = ()
    # What the report could not do (a config that does not parse, a rank that sent nothing).
    errors: tuple[ReportError, ...] = ()
    # What the reader needs to read the findings right (see `ReportInfo`); a mapping is read as its JSON form.
    info: ReportInfo = field(default_factory=ReportInfo)
    # Plots of the numbers in the tables (error by module, error vs position), for the HTML renderer.
    charts: tuple[Chart, ...] = ()

    def __post_init__(self) -> None:
        # A finding met twice word for word (two detectors, or two readings of one file, reaching the same
        # verdict) is reported once, whichever way the report was built (`of`, `merge`, `replace`, JSON).
        object.__setattr__(self, "findings", distinct_findings(self.findings))
        if not isinstance(self.info, ReportInfo):
            object.__setattr__(self, "info", ReportInfo.from_dict(self.info))

    @classmethod
    def of(cls, findings: Iterable[Finding], **kwargs: Any) -> "Report":
        return cls(findings=tuple(sort_findings(findings)), **kwargs)

    def merge(self, other: "Report") -> "Report":
        return Report(
            findings=tuple(sort_findings(self.findings + other.findings)),
            tables=self.tables + other.tables,
            checked=self.checked + other.checked,
            errors=self.errors + other.errors,
            info=self.info.merged(other.info),
            charts=self.charts + other.charts,
        )

    def with_info(self, **info: Any) -> "Report":
        """This report with the named `ReportInfo` fields set (an unknown name is a TypeError)."""
        return replace(self, info=replace(self.info, **info))

    @property
    def user_findings(self) -> tuple[Finding, ...]:
        """The findings about the user's own code (and configs): what the user can act on."""
        return tuple(f for f in self.findings if f.library is None)

    @property
    def library_findings(self) -> tuple[Finding, ...]:
        """The findings about what an installed library's code does (`Finding.library`), kept apart from the user's."""
        return tuple(f for f in self.findings if f.library is not None)

    def counts(self) -> dict[str, int]:
        counted = Counter(f.severity.value for f in self.findings)
        return {s.value: counted.get(s.value, 0) for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)}

    def at_or_above(self, severity: Severity) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity.rank >= severity.rank)

    def summary(self) -> dict[str, Any]:
        return {**self.counts(), "total": len(self.findings), "in_libraries": len(self.library_findings), "checked": len(self.checked),
                "input_errors": len(self.errors)}


def distinct_findings(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """`findings` in order, each finding that repeats an earlier one word for word (rule, severity, message, location,
    origin) left out; the first keeps its details."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for f in findings:
        key = (f.rule_id, f.severity, f.message, f.location, f.origin)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return tuple(out)


def root_cause(report: "Report") -> Finding | None:
    """The finding a failing run's analysis named its root cause, if any (it sorts first)."""
    return next((f for f in report.findings if f.details.get("root_cause", False)), None)


def cause_chain(f: Finding) -> list[tuple[str, Location]]:
    """The root cause's chain, from the failing op back to where the stray dtype entered (the origin) and what fed it
    there (the related places, each labelled with its part): (step, place)."""
    steps = [("failed at", f.location)]
    if f.origin is not None:
        steps.append(("origin", f.origin))
    return steps + [("from", loc) for loc in f.related if loc != f.origin]


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """The root cause of a failure first; then the user's findings before those inside installed libraries; then file,
    line, module; within a place, the most severe first."""

    def key(f: Finding) -> tuple[Any, ...]:
        loc = f.location
        return (not f.details.get("root_cause", False), f.library is not None, loc.file is None, loc.file or "", loc.line or 0, loc.column or 0,
                loc.module or "", -f.severity.rank, f.rule_id)

    return sorted(findings, key=key)


def summary_line(counts: dict[str, int], checked: Sequence[str] = (), unreadable: int = 0, *, clean: str = "no findings",
                 caveats: Sequence[str] = (), in_libraries: int = 0) -> str:
    """`2 errors in 5 checked`; inputs that could not be read are counted, so "no findings" never reads as a
    clean bill for files that were not looked at. `clean` replaces "no findings" where those words would say
    less than what was checked (`env`); `caveats` say what was not checked ("no optimizer step was seen")."""
    parts = [f"{n} {name}{'s' if n != 1 else ''}" for name, n in counts.items() if n]
    found = ", ".join(parts) if parts else clean
    if in_libraries:
        found += f" ({in_libraries} of them inside installed libraries)"
    line = f"{found}" + (f" in {len(checked)} checked" if checked else "")
    if unreadable:
        line += f"; {unreadable} input{'s' if unreadable != 1 else ''} with errors (see above)"
    for caveat in caveats:
        line += f"; {caveat}"
    return line


def report_summary(report: Report) -> str:
    """The summary line of `report`, with what its `info` says the words must not hide: `summary_when_clean` for
    the words of a report with no findings, `summary_caveats` for what was not checked (see `notes`)."""
    return summary_line(report.counts(), report.checked, len({e.file for e in report.errors}),
                        clean="no findings" if report.info.summary_when_clean is None else report.info.summary_when_clean,
                        caveats=report.info.summary_caveats, in_libraries=len(report.library_findings))


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
