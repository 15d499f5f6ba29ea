"""Loads the rule catalog (catalog.yaml) once, validates it, and looks rules up by name or id."""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any, Iterable, Mapping

import yaml

from ampdoctor.rules.model import DETECTORS, Finding, Location, Rule, Severity, Signature, Source

_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_ID = re.compile(r"^AMP\d{3}$")


def _signatures(raw: Iterable[Mapping[str, Any]] | None, where: str) -> tuple[Signature, ...]:
    out = []
    for item in raw or ():
        sig = Signature(str(item["pattern"]), float(item.get("weight", 1.0)))
        try:
            re.compile(sig.pattern)
        except re.error as exc:
            raise ValueError(f"{where}: bad regex {sig.pattern!r}: {exc}") from None
        out.append(sig)
    return tuple(out)


def _rule(raw: Mapping[str, Any]) -> Rule:
    where = f"rule {raw.get('id', '?')}"
    rule = Rule(
        id=str(raw["id"]),
        name=str(raw["name"]),
        severity=Severity.parse(str(raw["severity"])),
        summary=str(raw["summary"]).strip(),
        why=str(raw["why"]).strip(),
        fix=str(raw["fix"]).strip(),
        sources=tuple(Source.parse(s) for s in raw.get("sources", ())),
        detectors=tuple(raw.get("detectors", ())),
        incident=str(raw.get("incident", "")),
        example=str(raw.get("example", "")).rstrip(),
        use_instead=str(raw.get("use_instead", "")).rstrip(),
        signatures=_signatures(raw.get("signatures"), where),
        context=_signatures(raw.get("context"), where),
        confirm=str(raw.get("confirm", "")),
    )
    if not _ID.match(rule.id) or not _NAME.match(rule.name):
        raise ValueError(f"{where}: id must look like AMP123 and name must be kebab-case, got {rule.id!r} {rule.name!r}")
    unknown = set(rule.detectors) - set(DETECTORS)
    if unknown or not rule.detectors:
        raise ValueError(f"{where}: detectors must be a non-empty subset of {DETECTORS}, got {rule.detectors}")
    if not rule.sources:
        raise ValueError(f"{where}: every rule needs at least one source")
    if ("explain" in rule.detectors) != bool(rule.signatures):
        raise ValueError(f"{where}: a rule has signatures exactly when 'explain' is among its detectors")
    return rule


@functools.lru_cache(maxsize=1)
def catalog() -> tuple[Rule, ...]:
    """Every rule, in id order."""
    text = resources.files("ampdoctor.rules").joinpath("catalog.yaml").read_text(encoding="utf-8")
    rules = tuple(sorted((_rule(raw) for raw in yaml.safe_load(text)), key=lambda r: r.id))
    for attr in ("id", "name"):
        seen = [getattr(r, attr) for r in rules]
        dupes = {x for x in seen if seen.count(x) > 1}
        if dupes:
            raise ValueError(f"duplicate rule {attr}s in catalog: {sorted(dupes)}")
    return rules


@functools.lru_cache(maxsize=None)
def _index() -> dict[str, Rule]:
    index: dict[str, Rule] = {}
    for rule in catalog():
        index[rule.name] = rule
        index[rule.id.lower()] = rule
    return index


def get_rule(key: str) -> Rule:
    """Look a rule up by kebab-case name or by id (case-insensitive id)."""
    try:
        # Names are validated lowercase kebab-case and ids are indexed lowercased.
        return _index()[key.strip().lower()]
    except KeyError:
        raise KeyError(f"unknown rule {key!r}; `ampdoctor rules` lists them") from None


def finding(
    rule: str,
    message: str,
    location: Location | None = None,
    *,
    severity: Severity | None = None,
    fix: str | None = None,
    origin: Location | None = None,
    related: Iterable[Location] = (),
    details: Mapping[str, Any] | None = None,
) -> Finding:
    """Build a `Finding` for a catalog rule; id, name, default severity and fix come from the catalog."""
    r = get_rule(rule)
    return Finding(
        rule_id=r.id,
        name=r.name,
        severity=severity or r.severity,
        message=message,
        fix=fix or r.fix,
        location=location or Location(),
        origin=origin,
        related=tuple(related),
        details=dict(details or {}),
    )
