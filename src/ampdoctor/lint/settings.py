"""Lint settings, as ruff's: select/extend-select/ignore/per-file-ignores/fail-on/exclude/jobs, from
`[tool.ampdoctor]` in pyproject.toml and the CLI. Without `select`, lint checks the default rule set: every rule
but the design-choice ones the catalog marks `default: false` (pure-bf16 weights), which are opt-in."""

from __future__ import annotations

import fnmatch
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

from ampdoctor._quote import quoted
from ampdoctor.core import Finding, Severity, get_rule
from ampdoctor.core.catalog import default_rule_ids

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
            raise SettingsError(f"{where}: unknown rule {quoted(key)} (see `ampdoctor rules`)") from None
    return frozenset(out)


def _matches(path: str, pattern: str) -> bool:
    """A path matches a glob (``tests/*``, ``*.yaml``), a file name, or a folder anywhere in it (``third_party``)."""
    name = path.rsplit("/", 1)[-1]
    return fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(name, pattern) or f"/{pattern.strip('/')}/" in f"/{path}/"


@dataclass(frozen=True)
class LintSettings:
    select: frozenset[str] | None = None  # None: the default rule set; {"ALL"}: every rule
    extend_select: frozenset[str] = frozenset()
    ignore: frozenset[str] = frozenset()
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()  # (glob, rule ids)
    fail_on: Severity = Severity.ERROR
    exclude: tuple[str, ...] = ()
    jobs: int = 0  # 0: one worker per core
    root: Path | None = None  # the folder of the pyproject.toml the settings came from: patterns are relative to it
    project: Path | None = None  # lint the paths named inside this project (`--project`): its files give precision context
    cache: Path | None = None  # per-file results by content hash (`lint.cache`); the CLI keeps one unless `--no-cache`

    def selected(self, rule_id: str) -> bool:
        chosen = default_rule_ids() if self.select is None else self.select
        return "ALL" in chosen or rule_id in chosen or rule_id in self.extend_select

    def enabled(self, finding: Finding) -> bool:
        if not self.selected(finding.rule_id) or finding.rule_id in self.ignore:
            return False
        if not finding.location.file or not self.per_file_ignores:
            return True
        paths = self._spellings(Path(finding.location.file))
        return not any(finding.rule_id in ids and any(_matches(p, pattern) for p in paths) for pattern, ids in self.per_file_ignores)

    def _spellings(self, path: Path) -> list[str]:
        """The path as given and relative to the settings' root, which is what patterns are written against."""
        out = [path.as_posix()]
        if self.root is not None:
            try:
                out.append(Path(os.path.abspath(path)).relative_to(self.root).as_posix())
            except ValueError:
                pass
        return out

    def excluded(self, path: Path) -> bool:
        """`path` relative to the folder being walked."""
        return any(_matches(path.as_posix(), pat) for pat in self.exclude)

    def override(self, **changes: Any) -> "LintSettings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def _split(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [v for v in value.split(",")]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise SettingsError(f"{where}: expected a list of strings, got {quoted(value)}")


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start` (a symlink loop or an unreadable folder ends the search)."""
    try:
        here = start.resolve()
    except (OSError, RuntimeError, ValueError):
        here = Path(os.path.abspath(start))
    try:
        is_dir = here.is_dir()
    except OSError:  # a name too long for the file system: search from its folder
        is_dir = False
    for folder in (here, *here.parents) if is_dir else (here.parent, *here.parent.parents):
        candidate = folder / "pyproject.toml"
        try:
            if candidate.is_file():
                return candidate
        except OSError:
            return None
    return None


def parse_per_file_ignores(entries: Any, where: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """``{"tests/*": ["AMP004"]}`` (pyproject) or ``["tests/*:AMP004,AMP005"]`` (CLI) -> ((glob, ids), ...)."""
    pairs: list[tuple[str, Any]] = []
    if isinstance(entries, dict):
        pairs = list(entries.items())
    elif isinstance(entries, list) and all(isinstance(e, str) for e in entries):
        for entry in entries:
            pattern, sep, rules = entry.rpartition(":")
            if not sep or not pattern:
                raise SettingsError(f"{where}: expected PATTERN:RULES, got {quoted(entry)}")
            pairs.append((pattern, rules))
    else:
        raise SettingsError(f"{where}: expected a table of glob = [rules], got {quoted(entries)}")
    return tuple((str(pattern), rule_ids(_split(rules, where), where)) for pattern, rules in pairs)


_KNOWN = {"select", "extend-select", "extend_select", "ignore", "per-file-ignores", "per_file_ignores", "fail-on", "fail_on",
          "exclude", "jobs"}


def load_settings(pyproject: Path | None) -> LintSettings:
    """Settings from `[tool.ampdoctor]` (keys: select, extend-select, ignore, per-file-ignores, fail-on, exclude,
    jobs); defaults when absent."""
    if pyproject is None:
        return LintSettings()
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"{pyproject}: cannot read settings: {exc}") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):  # `tool = 3`: TOML allows it, the [tool.*] convention does not
        raise SettingsError(f"{pyproject}: `tool` must be a table, got {quoted(tool)}")
    table = tool.get("ampdoctor", {})
    if not isinstance(table, dict):
        raise SettingsError(f"{pyproject}: [tool.ampdoctor] must be a table")
    settings = LintSettings(root=Path(os.path.abspath(pyproject.parent)))
    unknown = set(table) - _KNOWN
    if unknown:
        raise SettingsError(f"{pyproject}: unknown [tool.ampdoctor] key(s) {sorted(unknown)}; expected {sorted(k for k in _KNOWN if '_' not in k)}")
    where = f"{pyproject} [tool.ampdoctor]"
    if "select" in table:
        settings = replace(settings, select=rule_ids(_split(table["select"], where), where))
    extend = table.get("extend-select", table.get("extend_select"))
    if extend is not None:
        settings = replace(settings, extend_select=rule_ids(_split(extend, where), where))
    if "ignore" in table:
        settings = replace(settings, ignore=rule_ids(_split(table["ignore"], where), where))
    per_file = table.get("per-file-ignores", table.get("per_file_ignores"))
    if per_file is not None:
        settings = replace(settings, per_file_ignores=parse_per_file_ignores(per_file, f"{where} per-file-ignores"))
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
