"""Run the checks over files: decode, parse, walk once, run every check whose trigger words occur, drop
suppressed findings. Files are spread over worker processes; a file that cannot be read or parsed becomes a
non-fatal `ReportError` for that file and never stops the run."""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib.util
import os
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Sequence

from ampdoctor.core.catalog import finding
from ampdoctor.core.model import Finding, Location
from ampdoctor.core.registry import detectors
from ampdoctor.lint.python.context import Context
from ampdoctor.lint.python.embedded import applies as holds_python_config
from ampdoctor.lint.python.embedded import embedded_findings
from ampdoctor.lint.python.source import SourceFile
from ampdoctor.lint.python.suppress import is_suppressed, parse_suppressions
from ampdoctor.report import ErrorKind, Report, ReportError

# Below this many files a process pool costs more than it saves.
PARALLEL_MIN_FILES = 24

FileResult = tuple[str, list[Finding], "ReportError | None"]


def lint_source(text: str, path: str = "<string>") -> tuple[list[Finding], ReportError | None]:
    """Findings for one source text (unsuppressed), or the error that kept it from being checked."""
    checks = [d for d in detectors("code") if d.applies(text)]
    configs = holds_python_config(text)
    try:
        if not checks and not configs:
            SourceFile.syntax_check(path, text)
            return [], None
        src = SourceFile.parse(path, text)
    except SyntaxError as exc:
        newer = newer_syntax(exc, text)
        if newer:
            version = f"{sys.version_info[0]}.{sys.version_info[1]}"
            return [], ReportError(path, f"{NEWER_PYTHON}{newer}; Python {version} cannot parse it, not checked", exc.lineno, exc.offset, fatal=False,
                                   kind=ErrorKind.NEWER_SYNTAX)
        return [], ReportError(path, f"syntax error: {exc.msg}", exc.lineno, exc.offset, fatal=False, kind=ErrorKind.SYNTAX)
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return [], ReportError(path, f"syntax error: {exc}", fatal=False, kind=ErrorKind.SYNTAX)
    ctx = Context(src)
    suppressions = parse_suppressions(text)
    findings: list[Finding] = []
    for check in checks:
        try:
            for node, message, *severity in check.fn(ctx):  # a third item, when given, is the hit's severity
                line = getattr(node, "lineno", None)
                column = getattr(node, "col_offset", None)
                found = finding(check.rule_id, message, Location(file=path, line=line, column=None if column is None else column + 1),
                                severity=severity[0] if severity else None)
                if not is_suppressed(found, suppressions):
                    findings.append(found)
        except RecursionError:
            return findings, ReportError(path, f"too deeply nested to check for {check.rule_id}", fatal=False)
    if configs:
        findings.extend(_config_findings(ctx, findings, suppressions))
    return findings, None


@functools.lru_cache(maxsize=1)
def _code_judged() -> frozenset[str]:
    """Rules with a code detector of their own: they judge Python (an FSDP `MixedPrecision(...)` too) themselves."""
    return frozenset(d.rule_id for d in detectors("code"))


def _config_findings(ctx: Context, found: list[Finding], suppressions) -> list[Finding]:
    """The policy rules' findings over the configs written in this file's Python (`lint.python.embedded`)."""
    seen = {(f.rule_id, f.location.line) for f in found}
    try:
        extra = embedded_findings(ctx, _code_judged())
    except RecursionError:
        return []
    return [f for f in extra if (f.rule_id, f.location.line) not in seen and not is_suppressed(f, suppressions)]


# The message of a file this interpreter cannot parse because it uses newer Python syntax (ErrorKind.NEWER_SYNTAX): a note, not an input
# error (the file is fine; linting it needs Python 3.12+).
NEWER_PYTHON = "uses syntax of Python 3.12+: "
_FSTRING_3_12 = ("f-string expression part cannot include a backslash", "f-string expression part cannot include '#'",
                 "f-string: unmatched", "f-string: expecting '}'")
_F_PREFIX = re.compile(r"(?i)(?:[rb]?f|f[rb]?)[\"']")
_TYPE_PARAMS = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+\w+\s*\[|^\s*type\s+\w+\s*(?:\[[^=]*\])?\s*=")


def newer_syntax(exc: SyntaxError, text: str) -> str | None:
    """What Python 3.12 syntax a SyntaxError of an older interpreter points at, if any: f-strings as PEP 701 allows
    them (quotes reused, line breaks, backslashes or comments inside the braces) or type parameters (PEP 695)."""
    if sys.version_info >= (3, 12) or not exc.lineno:
        return None
    lines = text.splitlines()
    line = lines[exc.lineno - 1] if exc.lineno <= len(lines) else ""
    msg = exc.msg or ""
    if msg.startswith(_FSTRING_3_12):
        return "an f-string (PEP 701)"
    if msg.startswith("unterminated string literal") and exc.offset and _F_PREFIX.match(line, exc.offset - 1) \
            and _opens_a_field(line[exc.offset - 1:]):
        return "an f-string spanning lines (PEP 701)"
    if _TYPE_PARAMS.match(line):
        return "type parameters (PEP 695)"
    return None


def _opens_a_field(rest: str) -> bool:
    """The f-string's line leaves a replacement field open: only then can 3.12 continue it on the next line (a bare
    unclosed quote such as ``f"`` is a syntax error in every version)."""
    rest = rest.replace("{{", "").replace("}}", "")
    return rest.count("{") > rest.count("}")


def lint_file(path: str) -> FileResult:
    try:
        text = importlib.util.decode_source(Path(path).read_bytes())
    except (OSError, UnicodeDecodeError, SyntaxError, LookupError) as exc:
        return path, [], ReportError(path, f"cannot read: {exc}", fatal=False, kind=ErrorKind.UNREADABLE)
    findings, error = lint_source(text, path)
    return path, findings, error


@contextlib.contextmanager
def _cycle_collector_paused():
    """ASTs are big acyclic object graphs that reference counting frees on its own. With torch imported the
    heap holds ~170k tracked objects, and every collection that AST allocation triggers rescans them: that
    doubled the time to lint the transformers tree (docs/benchmarks.md). Pause only the cycle collector."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _lint_chunk(paths: list[str]) -> list[FileResult]:
    with _cycle_collector_paused():
        return [lint_file(p) for p in paths]


def lint_python_files(files: Sequence[Path | str], jobs: int = 0) -> Report:
    """Lint `files` with `jobs` worker processes (0: one per core). Every file read is listed in `checked`."""
    paths = [str(f) for f in files]
    workers = jobs or os.cpu_count() or 1
    if workers <= 1 or len(paths) < PARALLEL_MIN_FILES:
        results = _lint_chunk(paths)
    else:
        # Interleaved chunks so that big files (one model family sits together) spread over the workers.
        n_chunks = workers * 16
        chunks = [paths[i::n_chunks] for i in range(n_chunks)]
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = [r for chunk in pool.map(_lint_chunk, chunks) for r in chunk]
    findings: list[Finding] = []
    errors: list[ReportError] = []
    checked: list[str] = []
    newer: list[ReportError] = []
    for path, found, error in results:
        findings.extend(found)
        if error is not None and error.kind is ErrorKind.UNREADABLE:
            errors.append(error)
            continue
        if error is not None and error.kind is ErrorKind.NEWER_SYNTAX:
            newer.append(error)
            continue
        checked.append(path)
        if error is not None:
            errors.append(error)
    report = Report.of(findings, checked=tuple(checked), errors=tuple(errors))
    if newer:
        many = len(newer) != 1
        report = report.with_info(notes=tuple(str(e) for e in newer), summary_caveats=(
            f"{len(newer)} file{'s' if many else ''} not checked: Python 3.12+ syntax (lint {'them' if many else 'it'} with Python 3.12+)",))
    return report
