"""JSON rendering; the schema is documented in docs/schema.md."""

from __future__ import annotations

import json
from typing import IO, Any

from ampdoctor._version import __version__
from ampdoctor.core import Finding
from ampdoctor.core.model import json_object
from ampdoctor.report.envelopes import candidates_document, statistics_document
from ampdoctor.report.model import Chart, Report, ReportError, ReportInfo, Table
from ampdoctor.report.renderer import DOCUMENT, FINDINGS, MEASUREMENTS, Candidates, Renderer

SCHEMA_VERSION = 1


def report_to_dict(report: Report) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": SCHEMA_VERSION,
        "tool": "ampdoctor",
        "tool_version": __version__,
        "findings": [f.to_dict() for f in report.findings],
        "summary": report.summary(),
        # Every key is always there (empty when there is nothing), so consumers need no existence checks.
        "info": report.info.to_dict(),
        "tables": [t.to_dict() for t in report.tables],
        "charts": [c.to_dict() for c in report.charts],
        "errors": [e.to_dict() for e in report.errors],
        "checked": list(report.checked),
    }
    return out


_TOP_REQUIRED = ("version", "tool", "tool_version", "findings", "summary")
_TOP_OPTIONAL = ("info", "tables", "charts", "errors", "checked")


def report_from_dict(data: Any) -> Report:
    """The inverse of `report_to_dict`, strict: a document of this schema version and nothing else (a rank's report
    that travels between processes is read with this, never executed). Raises ValueError."""
    data = json_object(data, _TOP_REQUIRED + _TOP_OPTIONAL, "report", _TOP_REQUIRED)
    if data["version"] != SCHEMA_VERSION or data["tool"] != "ampdoctor":
        raise ValueError(f"not an ampdoctor report of schema version {SCHEMA_VERSION}")
    for key in ("findings", "tables", "charts", "errors", "checked"):
        if not isinstance(data.get(key, []), list):
            raise ValueError(f"report.{key} must be a list")
    info = data.get("info", {})
    if not isinstance(info, dict):
        raise ValueError("report.info must be an object")
    info = ReportInfo.from_dict(info)
    checked = data.get("checked", [])
    if not all(isinstance(c, str) for c in checked):
        raise ValueError("report.checked must be a list of strings")
    return Report(
        findings=tuple(Finding.from_dict(f) for f in data["findings"]),
        tables=tuple(Table.from_dict(t) for t in data.get("tables", [])),
        charts=tuple(Chart.from_dict(c) for c in data.get("charts", [])),
        checked=tuple(checked),
        errors=tuple(ReportError.from_dict(e) for e in data.get("errors", [])),
        info=info,
    )


def render_json(report: Report) -> str:
    return json.dumps(report_to_dict(report), indent=2, sort_keys=False)


def _write_document(document: dict[str, Any], stream: IO[str]) -> None:
    json.dump(document, stream, indent=2)
    stream.write("\n")


def _write_candidates(answer: Candidates, stream: IO[str]) -> None:
    _write_document(candidates_document(answer.candidates), stream)


RENDERER = Renderer("json", lambda report, stream, full: stream.write(render_json(report) + "\n"), ".json", "JSON",
                    write_candidates=_write_candidates,
                    write_statistics=lambda report, stream: _write_document(statistics_document(report), stream),
                    kinds=frozenset({FINDINGS, MEASUREMENTS, DOCUMENT}), write_data=_write_document)
