"""One Report, many renderers: each format is a `Renderer` in `report.registry`."""

from __future__ import annotations

from ampdoctor.report.html import render_html
from ampdoctor.report.json_format import render_json, report_from_dict, report_to_dict
from ampdoctor.report.model import ErrorKind, Report, ReportError, ReportInfo, Table, exit_code, sort_findings
from ampdoctor.report.registry import formats, register, renderer, write_report
from ampdoctor.report.renderer import DOCUMENT, FINDINGS, MEASUREMENTS, Candidates, Renderer
from ampdoctor.report.sarif import render_sarif, report_to_sarif
from ampdoctor.report.text import render_text, write_text

# The built-in formats; `formats()` also names those registered later.
FORMATS = formats()

__all__ = [
    "DOCUMENT", "FINDINGS", "FORMATS", "MEASUREMENTS", "Candidates", "ErrorKind", "Renderer", "Report", "ReportError", "ReportInfo", "Table",
    "exit_code", "formats", "register", "render_json", "render_sarif", "render_text", "render_html", "renderer", "report_from_dict",
    "report_to_dict", "report_to_sarif", "sort_findings", "write_report", "write_text",
]
