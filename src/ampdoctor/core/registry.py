"""The registry of detectors, keyed by rule id: every detector of every rule is registered here by one
decorator, in the rule's own module (`ampdoctor/rules/ampNNN_<name>.py`), so that from a rule id a
reader finds all of its detectors in one file.

Detector kinds:
- ``policy``: a predicate over ``(policy, facts, at)`` -> hits. Asked by config lint (with what the readers
  found), `Policy.validate()` (unknown facts), the runtime audit (what it observed) and `PrecisionStep`.
- ``code``: a check over one parsed Python file (`ampdoctor.lint.python.context.Context`) -> (node, message).
- ``runtime``: a check over a finished audit recording (`ampdoctor.audit.analysis.RuntimeContext`) -> hits.
- ``ranks``: a check across the ranks of a distributed audit, over what each rank reported
  (``{rank: ampdoctor.audit.rankfacts.RankFacts}``, plain data) -> hits; asked when rank 0 merges.
- ``numerics``: a check over a float64-reference comparison (`ampdoctor.numerics.divergence.NumericsContext`) -> hits.
A rule's ``explain`` detector is its catalog signatures. A detector yields hits and never names a rule:
the registry attaches the rule it is registered under, so no detector can emit another rule's finding.
Rule modules import no torch at import time: lint, explain and rules run where torch is not installed.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ampdoctor.core.model import Location, Severity

KINDS: tuple[str, ...] = ("policy", "code", "runtime", "ranks", "numerics")
_MODULE = re.compile(r"^amp(?P<number>\d{3})_(?P<name>[a-z0-9_]+)$")


@dataclass(frozen=True)
class Hit:
    """What a detector found, before the registry makes it a `Finding` of the detector's rule."""

    message: str
    location: Location | None = None
    severity: Severity | None = None  # None: the catalog's severity
    origin: Location | None = None
    related: tuple[Location, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    fix: str | None = None  # None: the catalog's fix; a detector that knows the context may say better


@dataclass(frozen=True)
class Detector:
    rule_id: str
    kind: str
    fn: Callable[..., Iterable[Any]]
    # code detectors only: groups of words, one of each must occur in a file for the check to run.
    triggers: tuple[tuple[str, ...], ...] = ()
    # code detectors only: does it judge the configs a file writes in Python (an FSDP `MixedPrecision(...)`) itself?
    # Then the rule's policy check is not asked again over those configs (`lint.python.embedded`).
    reads_configs: bool = True
    # code detectors only: does it read the project context (`ctx.project`)? Only those run again when the
    # project's precision reaches a file (`lint.python.project`).
    project: bool = False

    @property
    def file(self) -> str:
        """``src/ampdoctor/rules/amp004_grad_scaler_with_bf16.py``: the file as it is in the repository."""
        # Relative to the package, not by looking for a folder named "ampdoctor": a clone is usually one as well.
        path = Path(self.fn.__code__.co_filename).resolve()
        package = Path(__file__).resolve().parents[1]
        return f"src/ampdoctor/{path.relative_to(package).as_posix()}" if path.is_relative_to(package) else path.name

    @property
    def where(self) -> str:
        """``src/ampdoctor/rules/amp004_grad_scaler_with_bf16.py:42``, for `ampdoctor rules`."""
        return f"{self.file}:{self.fn.__code__.co_firstlineno}"

    def applies(self, text: str) -> bool:
        return all(any(word in text for word in group) for group in self.triggers)


_REGISTERED: list[Detector] = []


def _register(rule_id: str, kind: str, triggers: tuple[tuple[str, ...], ...] = (),
              reads_configs: bool = True, project: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    if kind not in KINDS:
        raise ValueError(f"unknown detector kind {kind!r}")

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        _REGISTERED.append(Detector(rule_id, kind, fn, triggers, reads_configs, project))
        return fn

    return decorate


def policy_check(rule_id: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(policy: Policy | None, facts: RunFacts, at: Places) -> Iterable[Hit]``."""
    return _register(rule_id, "policy")


def code_check(rule_id: str, *, triggers: tuple[str, ...], also: tuple[tuple[str, ...], ...] = (),
               reads_configs: bool = True, project: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(ctx: Context) -> Iterable[(ast node, message)]``; it runs only on files containing one
    word of `triggers` and one of each group in `also`. `reads_configs=False`: it judges something other than the
    configs a file writes in Python, so those are still judged by the rule's policy check. `project=True`: it reads
    `ctx.project`, and runs again on the files a project's precision reaches."""
    return _register(rule_id, "code", (triggers, *also), reads_configs, project)


def runtime_check(rule_id: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(ctx: RuntimeContext) -> Iterable[Hit]``."""
    return _register(rule_id, "runtime")


def ranks_check(rule_id: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(ranks: Mapping[int, RankFacts]) -> Iterable[Hit]``: a check that compares ranks."""
    return _register(rule_id, "ranks")
def numerics_check(rule_id: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(ctx: NumericsContext) -> Iterable[Hit]``: a check over measured errors against a reference run."""
    return _register(rule_id, "numerics")


_FIXES: dict[str, Callable[..., Any]] = {}


def code_fix(rule_id: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(module: libcst.Module, lines: Mapping[int, tuple[Mapping[str, Any], ...]]) -> libcst.Module``:
    the safe, mechanical rewrite of a rule's findings at `lines` (`ampdoctor lint --fix`), each line with the
    details of each of its findings (what the detector knew that the rewrite needs: the fourth item of a code hit).
    It lives with the rule's detectors, in its module."""
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        _FIXES[rule_id] = fn
        return fn

    return decorate


def fixes() -> dict[str, Callable[..., Any]]:
    """The registered rewrites by rule id (the rule modules loaded first)."""
    _load()
    return dict(_FIXES)


# The one edge from the core up to the rules: the loader imports the rule modules by name, so that the core
# never imports a rule (and a rule is found by its file name alone, with no list to keep).
RULES_PACKAGE = "ampdoctor.rules"


def rule_modules() -> list[str]:
    """Names of the per-rule modules (``amp004_grad_scaler_with_bf16``), in id order."""
    folders = importlib.import_module(RULES_PACKAGE).__path__
    return sorted(m.name for m in pkgutil.iter_modules(folders) if _MODULE.match(m.name))


@functools.lru_cache(maxsize=1)
def _load() -> tuple[Detector, ...]:
    for name in rule_modules():
        importlib.import_module(f"{RULES_PACKAGE}.{name}")
    return tuple(sorted(_REGISTERED, key=lambda d: (d.rule_id, KINDS.index(d.kind))))


def detectors(kind: str | None = None, rule_id: str | None = None) -> tuple[Detector, ...]:
    """Registered detectors, optionally of one kind and/or one rule, in rule-id order."""
    return tuple(d for d in _load() if (kind is None or d.kind == kind) and (rule_id is None or d.rule_id == rule_id))


def kinds_of(rule_id: str) -> tuple[str, ...]:
    """The detector kinds registered for a rule, in `KINDS` order."""
    found = {d.kind for d in detectors(rule_id=rule_id)}
    return tuple(k for k in KINDS if k in found)
