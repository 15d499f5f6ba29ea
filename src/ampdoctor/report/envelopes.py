"""The JSON documents of the commands that do not report findings about an input: `rules`, `explain`, `env`.
Built here, next to the findings report's JSON, so that every machine-readable output has one home."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ampdoctor._version import __version__
from ampdoctor.core.model import Finding, Rule

SCHEMA_VERSION = 1


def _envelope(**body: Any) -> dict[str, Any]:
    return {"version": SCHEMA_VERSION, "tool": "ampdoctor", "tool_version": __version__, **body}


def rule_to_dict(rule: Rule) -> dict[str, Any]:
    from ampdoctor.core.registry import detectors

    return {
        "id": rule.id,
        "name": rule.name,
        "severity": rule.severity.value,
        "summary": rule.summary,
        "why": rule.why,
        "fix": rule.fix,
        "detectors": list(rule.detectors),
        "detector_sources": [{"kind": d.kind, "where": d.where} for d in detectors(rule_id=rule.id)],
        "incident": rule.incident or None,
        "example": rule.example or None,
        "use_instead": rule.use_instead or None,
        "signatures": [s.pattern for s in rule.signatures],
        "sources": [{"repo": s.repo, "number": s.number, "pull_request": s.pull_request, "note": s.note, "url": s.url} for s in rule.sources],
    }


def rules_document(rules: Sequence[Rule], *, single: bool = False) -> dict[str, Any]:
    """`ampdoctor rules --format json`: the catalog (or one rule, under "rule")."""
    if single:
        return _envelope(rule=rule_to_dict(rules[0]))
    return _envelope(rules=[rule_to_dict(r) for r in rules])


def candidates_document(candidates: Iterable[Any]) -> dict[str, Any]:
    """`ampdoctor explain --format json`: the ranked candidate rules."""
    return _envelope(candidates=[c.to_dict() for c in candidates])


def environment_document(environment: dict[str, Any], findings: Iterable[Finding]) -> dict[str, Any]:
    """`ampdoctor env --format json`: the machine's facts and what the rules say of bf16 on it."""
    return _envelope(environment=environment, findings=[f.to_dict() for f in findings])


def statistics_document(report: Any) -> dict[str, Any]:
    """`ampdoctor lint --statistics --format json`: findings counted per rule, and the report's summary."""
    from collections import Counter

    counted = Counter((f.rule_id, f.name, f.severity.value) for f in report.findings)
    rows = [{"id": i, "name": n, "severity": s, "count": c} for (i, n, s), c in sorted(counted.items(), key=lambda kv: (-kv[1], kv[0]))]
    return _envelope(statistics=rows, summary=report.summary(), errors=[e.to_dict() for e in report.errors])
