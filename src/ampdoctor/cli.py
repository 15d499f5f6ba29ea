"""Command-line interface: argument parsing only; every command calls the library.

Exit codes follow ruff: 0 nothing at or above --fail-on, 1 findings, 2 usage error or unreadable input.
Each command is a `_add_<name>(subparsers)` that registers its parser and a `_cmd_<name>(args) -> int`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Iterator

from ampdoctor._requires import MissingDependency, require_torch
from ampdoctor._version import __version__
from ampdoctor.report import FORMATS, Report, exit_code, write_report

if TYPE_CHECKING:
    from ampdoctor.lint import LintSettings
    from ampdoctor.policy import Policy


class UsageError(Exception):
    """Bad arguments or unreadable input: printed as one line, exit 2."""


@contextlib.contextmanager
def _output(path: str | None) -> Iterator[IO[str]]:
    if path is None:
        yield sys.stdout
        return
    try:
        with open(path, "w", encoding="utf-8") as fh:
            yield fh
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    except ValueError as exc:  # a NUL byte in the name
        raise UsageError(f"cannot write {path!r}: {exc}") from None


def _check_writable(path: str | None) -> None:
    """Fail now if the report could not be written to `path` (a missing folder, no permission, a directory)."""
    if path is None:
        return
    target = os.path.abspath(path)
    folder = os.path.dirname(target)
    if os.path.isdir(target):
        raise UsageError(f"cannot write {path}: it is a directory")
    if not os.path.isdir(folder):
        raise UsageError(f"cannot write {path}: no such directory {folder}")
    if not os.access(target if os.path.exists(target) else folder, os.W_OK):
        raise UsageError(f"cannot write {path}: permission denied")


def _emit(report: Report, args: argparse.Namespace) -> None:
    with _output(args.output) as stream:
        write_report(report.with_info(command=args.command), args.format, stream, full=getattr(args, "full", False))


def _add_output_options(parser: argparse.ArgumentParser, formats: tuple[str, ...] = FORMATS) -> None:
    parser.add_argument("--format", choices=formats, default="text", help="output format (default: text)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")


def _parse_policy(text: str) -> "Policy":
    from ampdoctor.policy import Policy

    try:
        return Policy.parse(text)
    except ValueError as exc:
        raise UsageError(f"--policy: {exc}") from None


# --- rules ---------------------------------------------------------------------------------------


def _add_rules(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rules", help="list the rule catalog, or show one rule")
    p.add_argument("rule", nargs="?", help="a rule name (grad-scaler-with-bf16) or id (AMP004)")
    _add_output_options(p, ("text", "json"))
    p.set_defaults(func=_cmd_rules)


def _cmd_rules(args: argparse.Namespace) -> int:
    from ampdoctor.report.envelopes import rules_document
    from ampdoctor.rules import catalog, get_rule
    from ampdoctor.rules.docs import write_rule, write_rule_table

    try:
        rules = [get_rule(args.rule)] if args.rule else list(catalog())
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    with _output(args.output) as stream:
        if args.format == "json":
            json.dump(rules_document(rules, single=bool(args.rule)), stream, indent=2)
            stream.write("\n")
        elif args.rule:
            write_rule(rules[0], stream)
        else:
            write_rule_table(rules, stream)
    return 0


# --- explain -------------------------------------------------------------------------------------


def _add_explain(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="explain an error message, traceback or training log")
    p.add_argument("text", nargs="*", help="the error text; '-' reads standard input")
    p.add_argument("--file", "-f", metavar="FILE", help="read the text (a log, a traceback) from FILE")
    p.add_argument("--limit", type=int, default=5, help="most candidates to show (default 5)")
    p.add_argument("--all", action="store_true", help="also the candidates that fit clearly worse than the best one, without --limit")
    _add_output_options(p)
    p.set_defaults(func=_cmd_explain)


def _read_explain_input(args: argparse.Namespace) -> str:
    if args.file:
        try:
            return Path(args.file).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
        except ValueError as exc:  # a NUL byte in the name
            raise UsageError(f"cannot read {args.file!r}: {exc}") from None
    if args.text == ["-"]:
        return sys.stdin.read()
    if args.text:
        return " ".join(args.text)
    raise UsageError("explain needs error text: an argument, '-' for standard input, or --file FILE")


def _cmd_explain(args: argparse.Namespace) -> int:
    from ampdoctor.explain import explain, explain_findings
    from ampdoctor.report.candidates import write_candidates
    from ampdoctor.report.envelopes import candidates_document

    text = _read_explain_input(args)
    if not text.strip():
        raise UsageError("the error text is empty")
    candidates = explain(text, limit=None if args.all else args.limit, weak=args.all)
    hidden = len(explain(text, limit=None, weak=True)) - len(candidates)
    with _output(args.output) as stream:
        if args.format == "json":
            json.dump(candidates_document(candidates), stream, indent=2)
            stream.write("\n")
        elif args.format == "sarif":
            write_report(Report.of(explain_findings(text, limit=args.limit)), "sarif", stream)
        else:
            write_candidates(candidates, stream, hidden=hidden)
    return 0 if candidates else 1


# --- env -----------------------------------------------------------------------------------------


def _add_env(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("env", help="what this machine can do for mixed precision")
    _add_output_options(p, ("text", "json"))
    p.set_defaults(func=_cmd_env)


def _cmd_env(args: argparse.Namespace) -> int:
    require_torch("ampdoctor env")
    from ampdoctor.env import collect, env_findings, env_report
    from ampdoctor.report.envelopes import environment_document

    env = collect()
    if args.format == "json":
        with _output(args.output) as stream:
            json.dump(environment_document(env.to_dict(), env_findings(env)), stream, indent=2)
            stream.write("\n")
    else:
        _emit(env_report(env), args)
    return 0


# --- lint ----------------------------------------------------------------------------------------


def _add_lint(sub: argparse._SubParsersAction) -> None:
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
    p.add_argument("--baseline", metavar="FILE", help="report only findings not in FILE; when FILE does not exist, record today's findings in it")
    p.add_argument("--jobs", "-j", type=int, help="worker processes for Python files (default: one per core)")
    p.add_argument("--config", metavar="PYPROJECT", help="read [tool.ampdoctor] from this file instead of the nearest pyproject.toml")
    p.add_argument("--no-config", action="store_true", help="ignore [tool.ampdoctor] settings")
    _add_output_options(p)
    p.set_defaults(func=_cmd_lint)


def _lint_settings(args: argparse.Namespace) -> "LintSettings":
    from ampdoctor.lint import SettingsError, load_settings
    from ampdoctor.lint.settings import find_pyproject, parse_per_file_ignores, rule_ids
    from ampdoctor.rules import Severity

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
        )
    except SettingsError as exc:
        raise UsageError(str(exc)) from None


def _emit_statistics(report: Report, args: argparse.Namespace) -> None:
    from ampdoctor.report.envelopes import statistics_document
    from ampdoctor.report.text import write_statistics

    if args.format == "sarif":
        raise UsageError("--statistics has no SARIF form: use --format text or json")
    with _output(args.output) as stream:
        if args.format == "json":
            json.dump(statistics_document(report), stream, indent=2)
            stream.write("\n")
        else:
            write_statistics(report, stream)


def _cmd_lint(args: argparse.Namespace) -> int:
    from ampdoctor.lint import lint_paths
    from ampdoctor.lint.baseline import BaselineError, load_baseline, only_new, write_baseline

    settings = _lint_settings(args)
    report = lint_paths(args.paths, settings)
    if args.baseline:
        path = Path(args.baseline)
        try:
            exists = os.path.exists(args.baseline)  # os.path never raises (a name too long, a NUL byte): writing says why
            if exists and not os.path.isfile(args.baseline):
                raise UsageError(f"--baseline {args.baseline}: not a regular file")
            if not exists:
                count = write_baseline(path, report)
                print(f"ampdoctor: recorded {count} finding(s) in the baseline {path}; later runs report only new ones", file=sys.stderr)
                return 2 if exit_code(report, settings.fail_on) == 2 else 0
            filtered = only_new(report, load_baseline(path))
        except BaselineError as exc:
            raise UsageError(str(exc)) from None
        report = filtered.report
        if filtered.known:
            print(f"ampdoctor: {filtered.known} finding(s) already in the baseline {path} are not shown", file=sys.stderr)
    if args.statistics:
        _emit_statistics(report, args)
    else:
        _emit(report, args)
    code = exit_code(report, settings.fail_on)
    return 0 if args.exit_zero and code == 1 else code


# --- run / audit (runtime dtype-flow audit) ------------------------------------------------------


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a training script as python would and audit its dtype flow",
                       usage="ampdoctor run [options] script.py [args ...] | ampdoctor run [options] -m module [args ...]")
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a library module as a script, like python -m")
    _add_audit_options(p, None)
    p.add_argument("--max-steps", type=int, default=None, metavar="N",
                   help="stop recording after N recorded optimizer steps; the script keeps running (default 1; with --every, no limit)")
    p.add_argument("--every", type=int, default=None, metavar="N",
                   help="sample the whole run: record one optimizer step in N (the 1st, N+1st, ...); the steps between run "
                        "with nothing of the audit in their way")
    p.add_argument("-v", "--verbose", action="store_true", help="a failing script's traceback with library (torch) frames too")
    p.add_argument("command_line", nargs=argparse.REMAINDER, help="the script and its arguments")
    p.set_defaults(func=_cmd_run)


def _add_audit_options(p: argparse.ArgumentParser, policy_default: str | None) -> None:
    p.add_argument("--policy", default=None,
                   help=f"the intended precision policy (default: {policy_default or 'the policy the script is observed to run'})")
    p.add_argument("--device-type", choices=("cpu", "cuda"), help="judge autocast-sensitive ops by this device's autocast lists (default: the device that ran)")
    p.add_argument("--fail-on", choices=("error", "warning", "info"), default="error", help="lowest severity that fails (default: error)")
    p.add_argument("--full", action="store_true", help="text: every table row (by default repeated layers are grouped, layers.0-31)")
    _add_output_options(p)


@contextlib.contextmanager
def _script_stdout_to_stderr(active: bool) -> Iterator[None]:
    """While a JSON or SARIF report goes to stdout, the audited script's own stdout (print, and subprocesses writing
    to file descriptor 1) goes to stderr, so that stdout holds one valid document."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _cmd_run(args: argparse.Namespace) -> int:
    require_torch("ampdoctor run")
    from ampdoctor.audit.commands import ScriptNotFound, run_command
    from ampdoctor.rules import Severity

    line = list(args.command_line)
    if line and line[0] == "--":
        line = line[1:]
    if args.module:
        target, rest = args.module, line
    elif line:
        target, rest = line[0], line[1:]
    else:
        raise UsageError("run needs a script (ampdoctor run train.py ...) or -m module")
    if args.max_steps is not None and args.max_steps < 1:
        raise UsageError("--max-steps must be at least 1")
    if args.every is not None and args.every < 1:
        raise UsageError("--every must be at least 1")
    max_steps = args.max_steps if args.max_steps is not None else (None if args.every else 1)
    _check_writable(args.output)  # before a run that may take an hour, not after it
    try:
        with _script_stdout_to_stderr(args.format != "text" and args.output is None):
            result = run_command(target, rest, module=bool(args.module), policy=_parse_policy(args.policy) if args.policy else None,
                                 max_steps=max_steps, every=args.every, verbose=args.verbose,
                                 device_type=None, target_device=args.device_type, fail_on=Severity.parse(args.fail_on), output=args.output)
    except ScriptNotFound as exc:
        raise UsageError(str(exc)) from None
    if result.report is not None:
        _emit(result.report, args)
    return result.exit_code


def _add_audit(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="audit one train step of a transformers model built from its config (random weights)")
    p.add_argument("--hf-config", required=True, metavar="CONFIG_JSON", help="a transformers config.json")
    p.add_argument("--fake", action="store_true", help="run on fake tensors: no memory for weights")
    p.add_argument("--seq-len", type=int, default=128, metavar="N", help="sequence length (default 128)")
    p.add_argument("--batch-size", type=int, default=1, metavar="N", help="batch size (default 1)")
    _add_audit_options(p, AUDIT_POLICY)
    p.set_defaults(func=_cmd_audit)


AUDIT_POLICY = "bf16-mixed"  # what `ampdoctor audit` builds and judges the model by without --policy


def _cmd_audit(args: argparse.Namespace) -> int:
    require_torch("ampdoctor audit")
    from ampdoctor.audit.hf import ConfigError, audit_hf_config
    from ampdoctor.rules import Severity

    if args.seq_len < 1 or args.batch_size < 1:
        raise UsageError("--seq-len and --batch-size must be at least 1")
    try:
        a = audit_hf_config(args.hf_config, policy=_parse_policy(args.policy or AUDIT_POLICY), fake=args.fake, seq_len=args.seq_len,
                            batch_size=args.batch_size, target_device=args.device_type)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    report = a.report if args.policy else a.report.with_info(policy_source="audit-default")
    _emit(report, args)
    return exit_code(report, Severity.parse(args.fail_on))


# --- compare / rope (numerics against a float64 reference) ---------------------------------------


def _load_factory(spec: str) -> tuple[object, object]:
    """`pkg.module:factory` -> what the factory returns: a (model, inputs) pair."""
    import importlib

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"{spec!r}: expected pkg.module:factory")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        factory = getattr(importlib.import_module(module_name), attr)
        made = factory()
    except Exception as exc:  # noqa: BLE001 - user code: any failure is unreadable input
        raise UsageError(f"{spec}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}") from None
    if not (isinstance(made, tuple) and len(made) == 2):
        raise UsageError(f"{spec}: the factory must return (model, inputs), got {type(made).__name__}")
    return made


def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="measure each module's error under a policy against a float64 reference")
    p.add_argument("factory", nargs="?", metavar="pkg.module:factory", help="a function returning (model, inputs)")
    p.add_argument("--hf-config", metavar="CONFIG_JSON", help="a transformers config.json (random weights)")
    p.add_argument("--policy", default="bf16-mixed", help="the precision policy to measure (default: bf16-mixed)")
    p.add_argument("--reference", choices=("fp64", "fp32"), default="fp64", help="the reference dtype (default: fp64)")
    p.add_argument("--seq-len", type=int, default=32, metavar="N", help="sequence length for --hf-config (default 32)")
    p.add_argument("--fail-on", choices=("error", "warning", "info"), default="error", help="lowest severity that fails (default: error)")
    _add_output_options(p, ("text", "json", "html"))
    p.set_defaults(func=_cmd_compare)


def _cmd_compare(args: argparse.Namespace) -> int:
    require_torch("ampdoctor compare")
    from ampdoctor.numerics import compare
    from ampdoctor.rules import Severity

    policy = _parse_policy(args.policy)
    if bool(args.factory) == bool(args.hf_config):
        raise UsageError("compare needs a model: pkg.module:factory or --hf-config config.json (one of them)")
    if args.hf_config:
        from ampdoctor.audit.hf import ConfigError
        from ampdoctor.numerics.hf import hf_model_and_inputs

        if args.seq_len < 1:
            raise UsageError("--seq-len must be at least 1")
        try:
            model, inputs = hf_model_and_inputs(args.hf_config, seq_len=args.seq_len)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    else:
        model, inputs = _load_factory(args.factory)
    try:
        result = compare(model, inputs, policy=policy, reference=args.reference)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise UsageError(f"compare: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}") from None
    _emit(result.report, args)
    return exit_code(result.report, Severity.parse(args.fail_on))


def _add_rope(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rope", help="RoPE table and logit error of the common variants against float64")
    p.add_argument("--head-dim", type=int, default=128, metavar="N", help="rotary dimension (default 128)")
    p.add_argument("--base", type=float, default=10000.0, help="RoPE base theta (default 10000)")
    p.add_argument("--max-position", type=int, default=4096, metavar="N", help="positions 0..N-1 (default 4096)")
    p.add_argument("--scaling", metavar="JSON", help='an HF rope_scaling dict, e.g. \'{"rope_type": "llama3", "factor": 8}\'')
    p.add_argument("--model", metavar="pkg.module:factory", help="also measure the rotary modules inside this model")
    p.add_argument("--html", metavar="FILE", help="also write the report as HTML to FILE")
    _add_output_options(p, ("text", "json"))
    p.set_defaults(func=_cmd_rope)


def _cmd_rope(args: argparse.Namespace) -> int:
    require_torch("ampdoctor rope")
    from ampdoctor.numerics.rope import rope_report
    from ampdoctor.numerics.views import rope_view
    from ampdoctor.report.html import render_html

    try:
        scaling = json.loads(args.scaling) if args.scaling else None
    except ValueError as exc:
        raise UsageError(f"--scaling: not JSON: {exc}") from None
    if scaling is not None and not isinstance(scaling, dict):
        raise UsageError("--scaling: expected a JSON object")
    model = _load_factory(args.model)[0] if args.model else None
    try:
        result = rope_report(args.head_dim, args.base, args.max_position, scaling, model=model)  # type: ignore[arg-type]
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"rope: {exc}") from None
    report = rope_view(result).with_info(command="rope")
    if args.html:
        try:
            Path(args.html).write_text(render_html(report), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {args.html}: {exc.strerror}") from None
    with _output(args.output) as stream:
        if args.format == "json":
            json.dump(result.to_dict(), stream, indent=2)
            stream.write("\n")
        else:
            write_report(report, "text", stream)
    return 0


# --- export --------------------------------------------------------------------------------------


def _add_export(sub: argparse._SubParsersAction) -> None:
    from ampdoctor.frameworks import TARGETS

    p = sub.add_parser("export", help="print the config fragment that makes a framework run a precision policy")
    p.add_argument("--policy", required=True, metavar="POLICY", help="a preset (bf16-mixed) or a policy string (params=fp32,compute=bf16)")
    p.add_argument("--to", required=True, choices=TARGETS, help="the framework")
    p.add_argument("--output", "-o", metavar="FILE", help="write the fragment to FILE instead of stdout")
    p.set_defaults(func=_cmd_export)


def _cmd_export(args: argparse.Namespace) -> int:
    from ampdoctor.frameworks import export

    policy = _parse_policy(args.policy)
    result = export(policy, args.to)
    header = [f"# ampdoctor export --policy {args.policy} --to {args.to}: {policy}"]
    notes = [f"# cannot express: {note}" for note in result.cannot_express]
    with _output(args.output) as stream:
        if result.syntax == "json":
            stream.write(result.text)  # JSON has no comments: the notes go to stderr
        else:
            stream.write("\n".join(header + notes) + "\n" + result.text)
    for note in result.cannot_express:
        print(f"ampdoctor: cannot express in {args.to}: {note}", file=sys.stderr)
    return 0


# --- main ----------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ampdoctor",
        description="Make BF16 mixed-precision training correct by construction, and diagnose it when it is not.",
    )
    parser.add_argument("--version", action="version", version=f"ampdoctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in (_add_lint, _add_explain, _add_rules, _add_env, _add_run, _add_audit, _add_compare, _add_rope, _add_export):
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.func(args)
    except (UsageError, MissingDependency) as exc:
        print(f"ampdoctor: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
