"""Loads the rule catalog (catalog.yaml) once, validates it, and looks rules up by name or id. A rule's
detector kinds are not written in the catalog: they come from the registry (`ampdoctor.core.registry`)."""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from importlib import resources
from typing import Any, Iterable, Mapping

import yaml

from ampdoctor.core.model import Finding, Location, Rule, Severity, Signature, Source

_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_ID = re.compile(r"^AMP\d{3}$")


def _signatures(raw: Iterable[Mapping[str, Any]] | None, where: str, check: bool = True) -> tuple[Signature, ...]:
    """The signatures written in `raw`; with `check`, each pattern is compiled first (a bad one is an error)."""
    out = tuple(Signature(str(item["pattern"]), float(item.get("weight", 1.0)), str(item.get("unless", "")),
                          bool(item.get("told", False)), str(item.get("doubt", ""))) for item in raw or ())
    if check:
        _compiled(out, where)
    return out


def _compiled(signatures: Iterable[Signature], where: str) -> None:
    for sig in signatures:
        for pattern in filter(None, (sig.pattern, sig.unless, sig.doubt)):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{where}: bad regex {pattern!r}: {exc}") from None


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
        incident=str(raw.get("incident", "")),
        example=str(raw.get("example", "")).rstrip(),
        use_instead=str(raw.get("use_instead", "")).rstrip(),
        # compiled by `catalog()`, which everything that reads them goes through: lint reads only the defaults
        signatures=_signatures(raw.get("signatures"), where, check=False),
        context=_signatures(raw.get("context"), where, check=False),
        confirm=str(raw.get("confirm", "")),
        default=bool(raw.get("default", True)),
        scope=str(raw.get("scope", "all")),
        severity_note=" ".join(str(raw.get("severity_note", "")).split()),
    )
    if not _ID.match(rule.id) or not _NAME.match(rule.name):
        raise ValueError(f"{where}: id must look like AMP123 and name must be kebab-case, got {rule.id!r} {rule.name!r}")
    if rule.scope not in ("all", "training", "compute"):
        raise ValueError(f"{where}: scope must be 'all', 'training' or 'compute', got {rule.scope!r}")
    if not rule.sources:
        raise ValueError(f"{where}: every rule needs at least one source")
    return rule


@functools.lru_cache(maxsize=1)
def _documented() -> tuple[Rule, ...]:
    """The catalog as written, without detector kinds."""
    text = resources.files("ampdoctor.rules").joinpath("catalog.yaml").read_text(encoding="utf-8")
    # libyaml's safe loader where PyYAML was built with it: the same safe subset, a tenth of the time (the catalog is
    # read by every lint, and is most of a cached re-lint's fixed cost)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    rules = tuple(sorted((_rule(raw) for raw in yaml.load(text, Loader=loader)), key=lambda r: r.id))
    for attr in ("id", "name"):
        seen = [getattr(r, attr) for r in rules]
        dupes = {x for x in seen if seen.count(x) > 1}
        if dupes:
            raise ValueError(f"duplicate rule {attr}s in catalog: {sorted(dupes)}")
    return rules


@functools.lru_cache(maxsize=1)
def catalog() -> tuple[Rule, ...]:
    """Every rule, in id order, with the detector kinds registered for it (plus ``explain`` for a rule with
    error signatures). A detector registered under an id the catalog lacks, or a rule nothing detects, is an error."""
    from ampdoctor.core.registry import detectors, kinds_of

    rules = _documented()
    known = {r.id for r in rules}
    strays = sorted({d.rule_id for d in detectors()} - known)
    if strays:
        raise ValueError(f"detectors registered for rules the catalog does not define: {strays}")
    out = []
    for rule in rules:
        _compiled((*rule.signatures, *rule.context), f"rule {rule.id}")
        kinds = kinds_of(rule.id) + (("explain",) if rule.signatures else ())
        if not kinds:
            raise ValueError(f"rule {rule.id} {rule.name}: no detector is registered and it has no error signature")
        out.append(replace(rule, detectors=kinds))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _index() -> dict[str, Rule]:
    index: dict[str, Rule] = {}
    for rule in _documented():
        index[rule.name] = rule
        index[rule.id.lower()] = rule
    return index


def get_rule(key: str) -> Rule:
    """Look a rule up by kebab-case name or by id (case-insensitive id); the result has its detector kinds."""
    try:
        # Names are validated lowercase kebab-case and ids are indexed lowercased.
        documented = _index()[key.strip().lower()]
    except KeyError:
        raise KeyError(f"unknown rule {key!r}; `ampdoctor rules` lists them") from None
    return _by_id()[documented.id]


@functools.lru_cache(maxsize=None)
def _by_id() -> dict[str, Rule]:
    return {rule.id: rule for rule in catalog()}


def documented_rule(key: str) -> Rule:
    """`get_rule` without loading the detectors (the rule's `detectors` is empty): for code that runs while
    the rule modules are being imported."""
    try:
        return _index()[key.strip().lower()]
    except KeyError:
        raise KeyError(f"unknown rule {key!r}; `ampdoctor rules` lists them") from None


def default_rule_ids() -> frozenset[str]:
    """The rules lint checks unless told otherwise."""
    return frozenset(r.id for r in _documented() if r.default)


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
    r = documented_rule(rule)
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


def finding_of(rule_id: str, hit: Any) -> Finding:
    """The `Finding` a registered detector's `Hit` becomes: the rule is the one the detector is registered under."""
    return finding(rule_id, hit.message, hit.location, severity=hit.severity, fix=hit.fix, origin=hit.origin,
                   related=hit.related, details=hit.details)
