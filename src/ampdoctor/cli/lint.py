"""`ampdoctor lint`: configs and Python sources, with ruff's selection options, a baseline and statistics."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ampdoctor.cli.common import UsageError, add_output_options, at_least, emit, output
from ampdoctor.report import Report, exit_code, renderer

if TYPE_CHECKING:
    from ampdoctor.lint import LintSettings


def add_lint(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lint", help="check configs and Python sources for mixed-precision bugs")
    p.add_argument("paths", nargs="*", default=["."], help="files or directories (default: .)")
    p.add_argument("--select", metavar="RULES", help="comma-separated rule names or ids to check instead of the default set (ALL: every rule)")
    p.add_argument("--extend-select", metavar="RULES", help="rules to check on top of the selection (the opt-in design-choice rules)")
    p.add_argument("--ignore", metavar="RULES", help="comma-separated rule names or ids to skip")
    p.add_argument("--per-file-ignores", metavar="PATTERN:RULES", action="append",
                   help="skip RULES in files matching PATTERN (repeatable), e.g. 'tests/*:AMP004,AMP005'")
    p.add_argument("--fail-on", choices=("error", "warning", "info"), help="lowest severity that fails (default: error)")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings are reported (2 still means unreadable input)")
    p.add_argument("--statistics", action="store_true", help="print how many findings each rule has instead of the findings")
    baseline = p.add_mutually_exclusive_group()
    baseline.add_argument("--baseline", metavar="FILE", help="report only findings not recorded in FILE (made by --write-baseline)")
    baseline.add_argument("--write-baseline", metavar="FILE", help="record today's findings in FILE, to be passed to --baseline later")
    p.add_argument("--jobs", "-j", type=at_least(0), metavar="N", help="worker processes for Python files (default, or 0: one per core)")
    p.add_argument("--fix", action="store_true", help="apply the safe, mechanical rewrites of the findings that have one, then "
                   "report what remains")
    p.add_argument("--diff", action="store_true", help="print the rewrites --fix would make as a unified diff and change nothing "
                   "(exit 1 when there is one)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the cache of per-file results "
                   "(default: .ampdoctor_cache in the current folder, or $AMPDOCTOR_CACHE_DIR)")
    p.add_argument("--project", metavar="DIR", help="judge the paths named inside this project: its training scripts and configs "
                   "say what precision the named files run under (for a pre-commit hook or CI that lints changed files only)")
    p.add_argument("--config", metavar="PYPROJECT", help="read [tool.ampdoctor] from this file instead of the nearest pyproject.toml")
    p.add_argument("--no-config", action="store_true", help="ignore [tool.ampdoctor] settings")
    add_output_options(p)
    p.set_defaults(func=_cmd_lint)


def _lint_settings(args: argparse.Namespace) -> "LintSettings":
    from ampdoctor.core import Severity
    from ampdoctor.lint import SettingsError, load_settings
    from ampdoctor.lint.settings import find_pyproject, parse_per_file_ignores, rule_ids

    try:
        if args.no_config:
            settings = load_settings(None)
        else:
            pyproject = Path(args.config) if args.config else find_pyproject(Path(args.paths[0]))
            if args.config and not os.path.isfile(args.config):  # never raises: a name too long, a NUL byte
                raise UsageError(f"--config {args.config}: no such file")
            settings = load_settings(pyproject)

        def ids(value: str | None, where: str) -> frozenset[str] | None:
            return rule_ids(value.split(","), where) if value else None

        return settings.override(
            select=ids(args.select, "--select"),
            extend_select=ids(args.extend_select, "--extend-select"),
            ignore=ids(args.ignore, "--ignore"),
            per_file_ignores=settings.per_file_ignores + parse_per_file_ignores(args.per_file_ignores, "--per-file-ignores")
            if args.per_file_ignores else None,
            fail_on=Severity.parse(args.fail_on) if args.fail_on else None,
            jobs=args.jobs,
            project=_project(args.project),
            cache=None if args.no_cache else Path(os.environ.get("AMPDOCTOR_CACHE_DIR") or ".ampdoctor_cache"),
        )
    except SettingsError as exc:
        raise UsageError(str(exc)) from None


def _rewrite(report: Report, args: argparse.Namespace) -> int:
    """Print (--diff) or apply (--fix) the registered rewrites of the report's findings; the number of files."""
    try:
        from ampdoctor.lint.rewrite import apply, rewrites
        found = rewrites(report.findings)
    except ImportError as exc:
        raise UsageError(f"--fix/--diff need LibCST ({exc.name}), which is not installed: pip install libcst") from None
    for rw in found:
        if args.diff:
            sys.stdout.write(rw.diff())
        else:
            apply(rw)
            print(f"ampdoctor: fixed {', '.join(rw.rules)} in {rw.path}", file=sys.stderr)
    return len(found)


def _project(value: str | None) -> Path | None:
    if value is None:
        return None
    if not os.path.isdir(value):  # os.path never raises: a name too long, a NUL byte
        raise UsageError(f"--project {value}: not a directory")
    return Path(value)


def _emit_statistics(report: Report, args: argparse.Namespace) -> None:
    chosen = renderer(args.format)
    if chosen.write_statistics is None:
        raise UsageError(f"--statistics has no {chosen.label} form: use --format text or json")
    with output(args.output) as stream:
        chosen.write_statistics(report, stream)


def _cmd_lint(args: argparse.Namespace) -> int:
    from ampdoctor.lint import lint_paths
    from ampdoctor.lint.baseline import BaselineError, load_baseline, only_new, write_baseline

    settings = _lint_settings(args)
    report = lint_paths(args.paths, settings)
    if args.write_baseline:
        path = Path(args.write_baseline)
        if os.path.exists(args.write_baseline) and not os.path.isfile(args.write_baseline):  # os.path never raises
            raise UsageError(f"--write-baseline {args.write_baseline}: not a regular file")
        try:
            count = write_baseline(path, report)
        except BaselineError as exc:
            raise UsageError(str(exc)) from None
        print(f"ampdoctor: recorded {count} finding(s) in the baseline {path}; `--baseline {path}` reports only new ones", file=sys.stderr)
        return 2 if exit_code(report, settings.fail_on) == 2 else 0
    if args.baseline:
        path = Path(args.baseline)
        # A missing baseline is an error, not an empty one: a misspelt path in CI would otherwise pass every run.
        if not os.path.exists(args.baseline):
            raise UsageError(f"--baseline {args.baseline}: no such file (record one with --write-baseline {args.baseline})")
        if not os.path.isfile(args.baseline):
            raise UsageError(f"--baseline {args.baseline}: not a regular file")
        try:
            filtered = only_new(report, load_baseline(path))
        except BaselineError as exc:
            raise UsageError(str(exc)) from None
        report = filtered.report
        if filtered.known:
            print(f"ampdoctor: {filtered.known} finding(s) already in the baseline {path} are not shown", file=sys.stderr)
    if args.fix or args.diff:
        done = _rewrite(report, args)
        if args.diff:
            return 1 if done else 0
        if done:
            report = lint_paths(args.paths, settings)  # what remains
    if args.statistics:
        _emit_statistics(report, args)
    else:
        emit(report, args)
    code = exit_code(report, settings.fail_on)
    return 0 if args.exit_zero and code == 1 else code
