"""`ampdoctor lint`: find the files under the given paths, hand Python sources to the code linter and
everything that may be a config to the config linter, then apply the select/ignore settings."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ampdoctor.dtypes import HALF
from ampdoctor.lint.launch import innermost_root, is_launcher, launched_scripts
from ampdoctor.lint.python.project import Evidence
from ampdoctor.lint.settings import LintSettings
from ampdoctor.report import Report, ReportError

if TYPE_CHECKING:  # the framework readers are imported where configs are read: a tree of Python needs none
    from ampdoctor.frameworks.base import Reading
    from ampdoctor.frameworks.document import OwnSaid
    from ampdoctor.lint.python.config_values import ConfigValues

# Folders that never hold the user's own training code or configs.
SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "env", "node_modules", "__pycache__", ".tox", ".nox",
                       ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages", ".eggs", "build", "dist"})
CONFIG_SUFFIXES = frozenset({".json", ".yaml", ".yml", ".toml", ".env"})
# Training configs are kilobytes; a larger JSON/YAML met while walking a tree is data (a tokenizer, a
# dataset) and reading it would cost seconds to minutes. Files named explicitly are always read.
MAX_CONFIG_BYTES = 1 << 20


def is_config_candidate(path: Path) -> bool:
    return path.suffix.lower() in CONFIG_SUFFIXES or path.name.endswith(".env")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # unreadable: let the reader report it


def discover(paths: Sequence[Path], settings: LintSettings) -> tuple[list[Path], list[Path], list[ReportError]]:
    """Python files and config candidates (shell launchers among them) under `paths` (sorted, unique), and paths
    that do not exist.
    Files named explicitly are always taken; directories are walked, skipping SKIP_DIRS, hidden folders and what
    `exclude` matches below the directory named (as ruff: naming an excluded folder lints it)."""
    python: set[Path] = set()
    configs: set[Path] = set()
    missing: list[ReportError] = []
    for root in paths:
        if _regular(root):
            (python if root.suffix == ".py" else configs).add(root)
        elif _directory(root):
            _walk(root, settings, python, configs)
        else:
            missing.append(ReportError(str(root), _why_unreadable(root)))
    return _sorted(python), _sorted(configs), missing


def _sorted(paths: set[Path]) -> list[Path]:
    # On POSIX a `Path` compares as its parts do: the same order, without the cost of a comparison per pair
    return sorted(paths, key=lambda p: p.parts) if os.name == "posix" else sorted(paths)


def _walk(root: Path, settings: LintSettings, python: set[Path], configs: set[Path]) -> None:
    """The Python files and config candidates below the folder `root`, added to `python` and `configs`."""
    excluding = bool(settings.exclude)  # a path below the root is built only to be matched against `exclude`
    for folder, dirs, files in os.walk(root):
        below = Path(folder).relative_to(root) if excluding else None
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".") and not (below is not None and settings.excluded(below / d)))
        for name in files:
            if (below is not None and settings.excluded(below / name)) or not _regular(os.path.join(folder, name)):
                continue  # a FIFO, socket or device would block or never end: only regular files are read
            path = Path(folder, name)
            if path.suffix == ".py":
                python.add(path)
            elif (is_config_candidate(path) or is_launcher(path)) and _size(path) <= MAX_CONFIG_BYTES:
                configs.add(path)


def _regular(path: Path | str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, RuntimeError, ValueError):  # missing, a symlink loop, a NUL byte in the name
        return False


def _directory(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name too long for the file system (is_dir swallows only "no such file")
        return False


def _why_unreadable(path: Path) -> str:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "no such file or directory" + (" (a broken symlink)" if path.is_symlink() else "")
    except (OSError, RuntimeError, ValueError) as exc:
        return f"cannot be read: {getattr(exc, 'strerror', None) or exc}"
    from ampdoctor.frameworks.located import file_kind

    return f"{file_kind(mode)}, not a file to lint; not read"



def lint_paths(paths: Sequence[str | Path], settings: LintSettings = LintSettings()) -> Report:
    """Lint files and directories; findings outside the settings' selection are dropped."""
    from ampdoctor.lint.python import lint_python_files

    python, configs, missing = discover([Path(p) for p in paths], settings)
    report = Report(errors=tuple(missing))
    folders = [Path(p) for p in paths if _directory(Path(p))]
    context: list[Path] = []
    context_configs: list[Path] = []
    if settings.project is not None:
        # The files named are judged inside this project: its other files give context, and are not reported.
        context, context_configs, _ = discover([settings.project], settings)
        folders.append(settings.project)
    # Shell launchers configure the runs of the scripts they start (`lint.launch`): evidence, not configs to judge.
    launchers = [c for c in [*configs, *context_configs] if is_launcher(c)]
    configs = [c for c in configs if not is_launcher(c)]
    context_configs = [c for c in context_configs if not is_launcher(c)]
    own, defaults = own_code_by_config([*configs, *context_configs], [*python, *context], folders)
    report, half, values = _read_configs(configs, context_configs, own, defaults, report)
    if python:
        launches = launched_scripts(launchers, [*python, *context], folders) if launchers else {}
        report = report.merge(lint_python_files(python, jobs=settings.jobs, roots=folders, config_half=half, context_files=context,
                                                cache=settings.cache, launches=launches, config_values=values,
                                                config_files=[*configs, *context_configs, *launchers]))
    report = _with_unchecked([Path(p) for p in paths], report)
    return replace(report, findings=tuple(f for f in report.findings if settings.enabled(f)))


def _read_configs(configs: list[Path], context_configs: list[Path], own: dict[Path, frozenset[str]], defaults: dict[Path, OwnSaid],
                  report: Report) -> tuple[Report, list[Evidence], ConfigValues | None]:
    """The report with the findings of `configs`; the training configs, of those and the context's, that compute
    in half precision (`half_configs`); and what their YAML files write for dtype and precision keys (for code that
    reads its dtype from a config object: `config_values`). The config readers are imported only where there are
    configs to read."""
    if not configs and not context_configs:
        return report, [], None
    from ampdoctor.lint.configs import lint_readings, read_configs
    from ampdoctor.lint.python.config_values import collect

    half: list[Evidence] = []
    documents: list = []  # every document parsed, each file's once
    if configs:
        readings, checked, errors = read_configs(configs, own, defaults, documents)
        report = report.merge(lint_readings(readings, checked, errors))
        half = half_configs(readings)
    if context_configs:
        half += half_configs(read_configs([c for c in context_configs if c not in set(configs)], own, defaults, documents)[0])
    return report, half, collect(documents)


def own_code_by_config(configs: Sequence[Path], python: Sequence[Path],
                       folders: Sequence[Path]) -> tuple[dict[Path, frozenset[str]], dict[Path, OwnSaid]]:
    """By config file, what its project's own code says of it (`embedded.own_code`, each file read once): the keys
    its own argument classes declare, and `OwnSaid` (where its own model-loading code defaults the load dtype to half,
    where it switches a DeepSpeed config's precision itself; configs of a project whose code does neither are left
    out of the second). A project is each folder linted (the innermost that holds the file), or the files named
    alone together."""
    if not configs:
        return {}, {}
    from ampdoctor.frameworks.document import OwnSaid
    from ampdoctor.lint.python.embedded import own_code

    roots = [f.absolute() for f in folders]

    def project(path: Path) -> Path | None:
        return innermost_root(path.absolute(), roots)

    by_project: dict[Path | None, list[Path]] = {}
    for path in python:
        by_project.setdefault(project(path), []).append(path)
    said = {root: own_code(files) for root, files in by_project.items()}
    by_config = {path: said.get(project(path), (frozenset(), OwnSaid())) for path in configs}
    return ({path: keys for path, (keys, _) in by_config.items()},
            {path: own for path, (_, own) in by_config.items() if own != OwnSaid()})


def half_configs(readings: Sequence[Reading]) -> list[Evidence]:
    """The training configs that compute in bf16/fp16: the project they lie in trains in half precision."""
    out = []
    for cfg in readings:
        policy = cfg.policy
        if policy is None or policy.compute not in HALF or cfg.facts.trains is False:
            continue
        where = cfg.locate()("compute")
        out.append(Evidence(f"{policy.compute} training config ({cfg.framework})", frozenset({str(policy.compute)}),
                            where.file or cfg.file, where.line or 1, casts_weights=cfg.facts.autocast is False,
                            autocasts=cfg.facts.autocast is True))
    return out


def _with_unchecked(named: Sequence[Path], report: Report) -> Report:
    """Files named on the command line that were neither Python nor a config a reader recognises are said to be
    unchecked (a note, not an input error: they were read, just not ampdoctor's to judge); silence after "no
    findings" would read as a clean bill for them. Files met while walking a folder are skipped quietly. A run
    that checked nothing at all (a wrong folder, every file excluded) says so instead of "no findings"."""
    if not report.checked and not report.errors and report.info.summary_when_clean is None:
        report = report.with_info(summary_when_clean="nothing checked: no Python file or training config found")
    seen = set(report.checked) | {e.file for e in report.errors}
    unchecked = [str(p) for p in named if p.suffix != ".py" and str(p) not in seen and _regular(p)]
    if not unchecked:
        return report
    notes = (*report.info.notes, *(f"{name}: not Python and not a training config ampdoctor recognises "
                                              "(DeepSpeed, HF Trainer, accelerate, Lightning, NeoX, torchtune, ...); not checked"
                                              for name in unchecked))
    caveats = (*report.info.summary_caveats, f"{len(unchecked)} named file{'s' if len(unchecked) != 1 else ''} not checked")
    return report.with_info(notes=notes, summary_caveats=caveats)
