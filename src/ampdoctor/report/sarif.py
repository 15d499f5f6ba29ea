"""SARIF 2.1.0 rendering, for GitHub code scanning and other CI annotators.

GitHub rejects a whole upload when one result has no physical location, so every result gets one: the file and
line of the finding, else of its origin or a related place, else the input the report checked (the audited script,
the config). Files under the working directory (the repository root in CI) are written relative to `%SRCROOT%`,
and `runAutomationDetails` carries one category per command, so that lint and run uploads do not replace each other.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ampdoctor._version import __version__
from ampdoctor.core import Location, Rule, Severity, catalog
from ampdoctor.report.model import Report
from ampdoctor.report.renderer import FINDINGS, Renderer

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
SRCROOT = "%SRCROOT%"


def _rule_descriptor(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.why},
        "help": {"text": f"{rule.why}\n\nFix: {rule.fix}", "markdown": f"{rule.why}\n\n**Fix:** {rule.fix}"},
        "helpUri": f"https://github.com/ampdoctor/ampdoctor/blob/main/docs/rules.md#{rule.id.lower()}-{rule.name}",
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
        "properties": {"tags": list(rule.detectors), "sources": [str(s) for s in rule.sources]},
    }


def artifact(file: str, root: Path) -> dict[str, Any]:
    """An artifactLocation: relative to %SRCROOT% when the file is under `root`, else an absolute file URI."""
    path = Path(os.path.abspath(file))
    try:
        return {"uri": path.relative_to(root).as_posix(), "uriBaseId": SRCROOT}
    except ValueError:
        return {"uri": path.as_uri()}


def _physical(file: str, line: int | None, column: int | None, root: Path) -> dict[str, Any]:
    region: dict[str, Any] = {"startLine": line or 1}
    if line and column:
        region["startColumn"] = column
    return {"artifactLocation": artifact(file, root), "region": region}


def _logical(loc: Location) -> list[dict[str, Any]]:
    logical = []
    if loc.module is not None:
        logical.append({"fullyQualifiedName": loc.module or "<root>", "kind": "module"})
    if loc.op:
        logical.append({"name": loc.op, "kind": "function"})
    return logical


def _location(loc: Location, root: Path, fallback: Location | None = None, message: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    anchor = loc if loc.file else fallback
    if anchor is not None and anchor.file:
        out["physicalLocation"] = _physical(anchor.file, anchor.line, anchor.column, root)
    logical = _logical(loc)
    if logical:
        out["logicalLocations"] = logical
    if message or loc.label:
        out["message"] = {"text": message or loc.label}
    return out


def _anchor(f: Any, report: Report) -> Location | None:
    """Where a result without a file of its own is shown: its origin or a related place with a file, else the
    input the report checked (the audited script)."""
    for loc in (f.origin, *f.related):
        if loc is not None and loc.file:
            return loc
    checked = next((c for c in report.checked if _is_path(c)), None)
    return Location(file=checked) if checked else None


def _is_path(text: str) -> bool:
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def _fingerprint(f: Any) -> str:
    loc = f.location
    key = "\0".join(str(x) for x in (f.rule_id, loc.file, loc.module, loc.op, f.message))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def report_to_sarif(report: Report, root: Path | None = None) -> dict[str, Any]:
    root = Path(os.path.abspath(root or Path.cwd()))
    rules = catalog()
    index = {r.id: i for i, r in enumerate(rules)}
    results = []
    for f in report.findings:
        result: dict[str, Any] = {
            "ruleId": f.rule_id,
            "ruleIndex": index[f.rule_id],
            "level": _LEVEL[f.severity],
            "message": {"text": f"{f.message} Fix: {f.fix}"},
            "locations": [_location(f.location, root, _anchor(f, report))],
            "partialFingerprints": {"ampdoctorFinding/v1": _fingerprint(f)},
        }
        if f.library is not None:  # about an installed library's code, not the user's: kept apart by consumers
            result["properties"] = {"library": f.library}
        related = ([_location(f.origin, root, message="origin: " + str(f.origin))] if f.origin else []) + [_location(r, root) for r in f.related]
        related = [loc for loc in related if "physicalLocation" in loc or "logicalLocations" in loc]
        if related:
            result["relatedLocations"] = [dict(loc, id=i) for i, loc in enumerate(related)]
        results.append(result)
    command = report.info.command if report.info.command is not None else "ampdoctor"
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "ampdoctor", "version": __version__, "informationUri": "https://github.com/ampdoctor/ampdoctor",
                            "rules": [_rule_descriptor(r) for r in rules]}},
        "automationDetails": {"id": f"ampdoctor/{command}/"},
        "originalUriBaseIds": {SRCROOT: {"uri": root.as_uri() + "/"}},
        "results": results,
        "invocations": [{
            "executionSuccessful": not any(e.fatal for e in report.errors),
            "toolExecutionNotifications": [{"level": "error" if e.fatal else "warning", "message": {"text": str(e)}} for e in report.errors],
        }],
    }
    info = report.info.to_dict()
    if info:
        run["properties"] = {k: v for k, v in info.items() if isinstance(v, (str, int, float, bool))}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def render_sarif(report: Report) -> str:
    return json.dumps(report_to_sarif(report), indent=2)


# SARIF is about findings at places: no measurements form (compare), no statistics form; explain's candidates are
# written as their findings.
RENDERER = Renderer("sarif", lambda report, stream, full: stream.write(render_sarif(report) + "\n"), ".sarif", "SARIF",
                    kinds=frozenset({FINDINGS}))
