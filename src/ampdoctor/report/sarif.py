"""SARIF 2.1.0 rendering, for GitHub code scanning and other CI annotators."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ampdoctor._version import __version__
from ampdoctor.report.model import Report
from ampdoctor.rules import Location, Rule, Severity, catalog

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


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


def _location(loc: Location, message: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if loc.file:
        region: dict[str, Any] = {}
        if loc.line:
            region["startLine"] = loc.line
            if loc.column:
                region["startColumn"] = loc.column
        physical: dict[str, Any] = {"artifactLocation": {"uri": Path(loc.file).as_posix()}}
        if region:
            physical["region"] = region
        out["physicalLocation"] = physical
    logical = []
    if loc.module is not None:
        logical.append({"fullyQualifiedName": loc.module or "<root>", "kind": "module"})
    if loc.op:
        logical.append({"name": loc.op, "kind": "function"})
    if logical:
        out["logicalLocations"] = logical
    if message or loc.label:
        out["message"] = {"text": message or loc.label}
    return out


def report_to_sarif(report: Report) -> dict[str, Any]:
    rules = catalog()
    index = {r.id: i for i, r in enumerate(rules)}
    results = []
    for f in report.findings:
        result: dict[str, Any] = {
            "ruleId": f.rule_id,
            "ruleIndex": index[f.rule_id],
            "level": _LEVEL[f.severity],
            "message": {"text": f"{f.message} Fix: {f.fix}"},
            "locations": [_location(f.location)],
        }
        related = ([_location(f.origin, "origin: " + str(f.origin))] if f.origin else []) + [_location(r) for r in f.related]
        if related:
            result["relatedLocations"] = [dict(loc, id=i) for i, loc in enumerate(related)]
        results.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "ampdoctor",
                        "version": __version__,
                        "informationUri": "https://github.com/ampdoctor/ampdoctor",
                        "rules": [_rule_descriptor(r) for r in rules],
                    }
                },
                "results": results,
                "invocations": [
                    {
                        "executionSuccessful": not report.errors,
                        "toolExecutionNotifications": [
                            {"level": "error", "message": {"text": str(e)}} for e in report.errors
                        ],
                    }
                ],
            }
        ],
    }


def render_sarif(report: Report) -> str:
    return json.dumps(report_to_sarif(report), indent=2)
