"""One Report, many renderers."""

from __future__ import annotations

from typing import IO

from ampdoctor.report.html import render_html
from ampdoctor.report.json_format import render_json, report_from_dict, report_to_dict
from ampdoctor.report.model import Report, ReportError, Table, exit_code, sort_findings
from ampdoctor.report.sarif import render_sarif, report_to_sarif
from ampdoctor.report.text import render_text, write_text

FORMATS = ("text", "json", "sarif", "html")


def write_report(report: Report, fmt: str, stream: IO[str], *, full: bool = False) -> None:
    """Render in `fmt` to `stream`; text is coloured only when `stream` is a terminal, and groups repeated layers
    in tables unless `full` (the other formats always carry every row)."""
    if fmt == "text":
        write_text(report, stream, full=full)
    elif fmt == "json":
        stream.write(render_json(report) + "\n")
    elif fmt == "sarif":
        stream.write(render_sarif(report) + "\n")
    elif fmt == "html":
        stream.write(render_html(report))
    else:
        raise ValueError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")


__all__ = [
    "FORMATS", "Report", "ReportError", "Table", "exit_code", "render_json", "render_sarif", "render_text", "render_html", "report_from_dict", "report_to_dict",
    "report_to_sarif", "sort_findings", "write_report", "write_text",
]
