"""Lint settings: select/ignore/fail-on/exclude, from `[tool.ampdoctor]` in pyproject.toml and the CLI."""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

from ampdoctor.rules import Finding, Severity, get_rule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class SettingsError(ValueError):
    """A setting that cannot be used; the message names where it came from."""


def rule_ids(keys: Iterable[str], where: str) -> frozenset[str]:
    """Resolve rule names or ids (``grad-scaler-with-bf16``, ``AMP004``) to ids; ``ALL`` selects every rule."""
    out = set()
    for key in keys:
        key = key.strip()
        if not key:
            continue
        if key.upper() == "ALL":
            return frozenset({"ALL"})
        try:
            out.add(get_rule(key).id)
        except KeyError:
            raise SettingsError(f"{where}: unknown rule {key!r} (see `ampdoctor rules`)") from None
    return frozenset(out)


@dataclass(frozen=True)
class LintSettings:
    select: frozenset[str] = frozenset({"ALL"})
    ignore: frozenset[str] = frozenset()
    fail_on: Severity = Severity.ERROR
    exclude: tuple[str, ...] = ()
    jobs: int = 0  # 0: one worker per core

    def enabled(self, finding: Finding) -> bool:
        selected = "ALL" in self.select or finding.rule_id in self.select
        return selected and finding.rule_id not in self.ignore

    def excluded(self, path: Path) -> bool:
        text = path.as_posix()
        return any(fnmatch.fnmatch(text, pat) or fnmatch.fnmatch(path.name, pat) or f"/{pat.strip('/')}/" in f"/{text}/" for pat in self.exclude)

    def override(self, **changes: Any) -> "LintSettings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def _split(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [v for v in value.split(",")]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise SettingsError(f"{where}: expected a list of strings, got {value!r}")


def find_pyproject(start: Path) -> Path | None:
    here = start.resolve()
    for folder in (here, *here.parents) if here.is_dir() else (here.parent, *here.parent.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_settings(pyproject: Path | None) -> LintSettings:
    """Settings from `[tool.ampdoctor]` (keys: select, ignore, fail-on, exclude, jobs); defaults when absent."""
    if pyproject is None:
        return LintSettings()
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"{pyproject}: cannot read settings: {exc}") from None
    table = data.get("tool", {}).get("ampdoctor", {})
    if not isinstance(table, dict):
        raise SettingsError(f"{pyproject}: [tool.ampdoctor] must be a table")
    settings = LintSettings()
    known = {"select", "ignore", "fail-on", "fail_on", "exclude", "jobs"}
    unknown = set(table) - known
    if unknown:
        raise SettingsError(f"{pyproject}: unknown [tool.ampdoctor] key(s) {sorted(unknown)}; expected {sorted(known - {'fail_on'})}")
    where = f"{pyproject} [tool.ampdoctor]"
    if "select" in table:
        settings = replace(settings, select=rule_ids(_split(table["select"], where), where))
    if "ignore" in table:
        settings = replace(settings, ignore=rule_ids(_split(table["ignore"], where), where))
    fail_on = table.get("fail-on", table.get("fail_on"))
    if fail_on is not None:
        try:
            settings = replace(settings, fail_on=Severity.parse(str(fail_on)))
        except ValueError as exc:
            raise SettingsError(f"{where}: fail-on: {exc}") from None
    if "exclude" in table:
        settings = replace(settings, exclude=tuple(_split(table["exclude"], where)))
    if "jobs" in table:
        if not isinstance(table["jobs"], int) or table["jobs"] < 0:
            raise SettingsError(f"{where}: jobs must be a non-negative integer")
        settings = replace(settings, jobs=table["jobs"])
    return settings
