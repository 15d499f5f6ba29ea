"""JSON rendering; the schema is documented in docs/report-format.md."""

from __future__ import annotations

import json
from typing import Any

from ampdoctor._version import __version__
from ampdoctor.report.model import Report

SCHEMA_VERSION = 1


def report_to_dict(report: Report) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": SCHEMA_VERSION,
        "tool": "ampdoctor",
        "tool_version": __version__,
        "findings": [f.to_dict() for f in report.findings],
        "summary": report.summary(),
    }
    if report.info:
        out["info"] = dict(report.info)
    if report.tables:
        out["tables"] = [t.to_dict() for t in report.tables]
    if report.charts:
        out["charts"] = [c.to_dict() for c in report.charts]
    if report.errors:
        out["errors"] = [e.to_dict() for e in report.errors]
    if report.checked:
        out["checked"] = list(report.checked)
    return out


def render_json(report: Report) -> str:
    return json.dumps(report_to_dict(report), indent=2, sort_keys=False)
