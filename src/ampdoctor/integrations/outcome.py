"""What every trainer integration does with its `Report`: decide whether training must stop (`fail_on`), write
the report files on the main process, and turn it into log lines and metrics. No framework is imported here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ampdoctor.core.model import Severity
from ampdoctor.report import Report, exit_code, formats, render_text, renderer, write_report

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


def failed(report: Report, exc: BaseException) -> Report:
    """`report` of a step that raised `exc`: it says so, as the CLI's report of a failing script does."""
    text = " ".join(str(exc).split())
    return report.with_info(script_failed=True, exception=f"{type(exc).__name__}: {text[:500]}")


class FirstStep:
    """The audit of a trainer's first step, as a callback runs it: begun at the step's first event, ended once (at
    the step's end, on a failure or at teardown), never begun again. Where an audit already records this process
    (`ampdoctor run` of the script), that one sees the step and none is begun: a second would be refused."""

    def __init__(self) -> None:
        self.audit: Any = None  # the running `Audit`
        self.done = False

    def begin(self, policy: Any, model: Any, device_type: str, checked: str) -> bool:
        """Enter the audit of this step; False where it ran, runs, or another audit records."""
        if self.done or self.audit is not None:
            return False
        from ampdoctor.audit.recorder import active_recorder
        from ampdoctor.audit.session import Audit

        if active_recorder() is not None:
            self.done = True
            return False
        self.audit = Audit(policy, model=model, device_type=device_type, max_steps=1, checked=(checked,))
        self.audit.__enter__()
        return True

    @property
    def running(self) -> bool:
        return self.audit is not None

    def snapshot_grads(self, when: Any) -> None:
        """Read the gradients' dtypes at an event the audit's own hooks do not see (`recorder.snapshot_grads`)."""
        if self.audit is not None:
            self.audit.recorder.snapshot_grads(when)

    def end(self, exception: BaseException | None = None) -> Report | None:
        """Exit the running audit (every hook and mode it set is removed) and return its report; None where none runs."""
        audit, self.audit = self.audit, None
        if audit is None:
            return None
        self.done = True
        audit.__exit__(type(exception) if exception is not None else None, exception, None)
        return audit.report


def metrics(report: Report, prefix: str = "ampdoctor/") -> dict[str, float]:
    """Counts per severity, as numbers a metrics logger (W&B, TensorBoard) takes."""
    return {f"{prefix}{name}": float(n) for name, n in report.counts().items()}


def summary(report: Report) -> str:
    """The report as plain text, for a log."""
    return render_text(report, color=False)


# The files a trainer integration writes, where the renderer registry has these formats (each `<stem><extension>`).
REPORT_FILE_FORMATS = ("json", "html")


def write_report_files(report: Report, output_dir: str | Path, stem: str = REPORT_STEM) -> list[Path]:
    """`<stem>.json` and `<stem>.html` (each that the renderer registry has) in `output_dir`; the paths written."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in (n for n in REPORT_FILE_FORMATS if n in formats()):
        path = folder / f"{stem}{renderer(name).extension}"
        with path.open("w", encoding="utf-8") as stream:
            write_report(report, name, stream)
        written.append(path)
    return written
