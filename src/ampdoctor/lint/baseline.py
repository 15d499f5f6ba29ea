"""A baseline of accepted findings: record what lint reports today, then report only what is new.

A finding is remembered by a fingerprint that survives edits elsewhere in the file: its rule, its file and the
text of the line it points at (not the line number), or its message with numbers removed when it points at no
line. Fingerprints are counted, so a second copy of a recorded finding is new.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from ampdoctor._quote import quoted
from ampdoctor.core.model import Finding
from ampdoctor.report import Report

VERSION = 1
_DIGITS = re.compile(r"\d+")


class BaselineError(ValueError):
    """A baseline file that cannot be read or written; the message names it."""


def _line_text(file: str, line: int, cache: dict[str, list[str] | None]) -> str | None:
    if file not in cache:
        try:
            cache[file] = Path(file).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            cache[file] = None
    lines = cache[file]
    return lines[line - 1].strip() if lines is not None and 0 < line <= len(lines) else None


def fingerprint(f: Finding, cache: dict[str, list[str] | None]) -> str:
    loc = f.location
    anchor = _line_text(loc.file, loc.line, cache) if loc.file and loc.line else None
    if anchor is None:
        anchor = _DIGITS.sub("#", f.message)
    file = Path(loc.file).as_posix() if loc.file else ""
    return hashlib.sha256(f"{f.rule_id}\0{file}\0{anchor}".encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Filtered:
    report: Report
    known: int  # findings the baseline already held


def write_baseline(path: Path, report: Report) -> int:
    cache: dict[str, list[str] | None] = {}
    entries = [{"id": f.rule_id, "file": f.location.file, "fingerprint": fingerprint(f, cache), "message": f.message} for f in report.findings]
    try:
        path.write_text(json.dumps({"version": VERSION, "tool": "ampdoctor", "findings": entries}, indent=2) + "\n", encoding="utf-8")
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        raise BaselineError(f"cannot write baseline {quoted(str(path))}: {getattr(exc, 'strerror', None) or exc}") from None
    return len(entries)


def load_baseline(path: Path) -> Counter[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Counter(str(e["fingerprint"]) for e in data["findings"])
    except OSError as exc:
        raise BaselineError(f"cannot read baseline {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise BaselineError(f"{path} is not an ampdoctor baseline ({type(exc).__name__}: {exc})") from None


def only_new(report: Report, baseline: Counter[str]) -> Filtered:
    """The report without the findings the baseline holds."""
    remaining = Counter(baseline)
    cache: dict[str, list[str] | None] = {}
    new = []
    for f in report.findings:
        key = fingerprint(f, cache)
        if remaining[key] > 0:
            remaining[key] -= 1
        else:
            new.append(f)
    return Filtered(replace(report, findings=tuple(new)), len(report.findings) - len(new))
