"""What every trainer integration does with its `Report`: decide whether training must stop (`fail_on`), write
the report files on the main process, and turn it into log lines and metrics. No framework is imported here."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from ampdoctor.report import Report, exit_code, render_json, render_text
from ampdoctor.rules.model import Severity

FAIL_ON = ("warning", "error")
REPORT_STEM = "ampdoctor-report"


class AmpDoctorError(RuntimeError):
    """Raised by an integration whose `fail_on` severity was reached: training stops here, before more compute is spent."""

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


def fail_severity(fail_on: str | None) -> Severity | None:
    """The lowest severity that stops training, None to never stop; refuses anything else at construction time."""
    if fail_on is None:
        return None
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on must be None, 'warning' or 'error', not {fail_on!r}")
    return Severity.parse(fail_on)


def check_fail_on(report: Report, fail_on: Severity | None, where: str) -> None:
    """Raise `AmpDoctorError` when `report` has a finding at or above `fail_on` (the CLI's exit code 1)."""
    if fail_on is None or exit_code(report, fail_on) != 1:
        return
    worst = report.at_or_above(fail_on)
    lines = [f"  {f.rule_id} {f.name} at {f.location}: {f.message}" for f in worst[:5]]
    more = f"\n  ... and {len(worst) - 5} more" if len(worst) > 5 else ""
    raise AmpDoctorError(f"ampdoctor stopped training ({where}): {len(worst)} finding(s) at or above fail_on={fail_on.value!r}\n"
                         + "\n".join(lines) + more + "\n(see `ampdoctor rules ID` for each rule, or pass fail_on=None to only report)", report)


def metrics(report: Report, prefix: str = "ampdoctor/") -> dict[str, float]:
    """Counts per severity, as numbers a metrics logger (W&B, TensorBoard) takes."""
    return {f"{prefix}{name}": float(n) for name, n in report.counts().items()}


def summary(report: Report) -> str:
    """The report as plain text, for a log."""
    return render_text(report, color=False)


def _html_renderer() -> Any:
    """`ampdoctor.report.html.render_html` where this ampdoctor has an HTML renderer, else None."""
    try:
        module = importlib.import_module("ampdoctor.report.html")
    except ImportError:
        return None
    return getattr(module, "render_html", None)


def write_report_files(report: Report, output_dir: str | Path, stem: str = REPORT_STEM) -> list[Path]:
    """`<stem>.json` (and `<stem>.html` where an HTML renderer exists) in `output_dir`; the paths written."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / f"{stem}.json"]
    written[0].write_text(render_json(report) + "\n", encoding="utf-8")
    render_html = _html_renderer()
    if callable(render_html):
        html = folder / f"{stem}.html"
        html.write_text(render_html(report), encoding="utf-8")
        written.append(html)
    return written
