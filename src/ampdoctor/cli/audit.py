"""The runtime audit: `ampdoctor run` (a training script as python would run it) and `ampdoctor audit` (one train
step of a transformers model built from its config)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Iterator

from ampdoctor._requires import require_torch
from ampdoctor.cli.common import UsageError, add_output_options, check_writable, emit, parse_policy
from ampdoctor.report import exit_code


def add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a training script as python would and audit its dtype flow",
                       usage="ampdoctor run [options] script.py [args ...] | ampdoctor run [options] -m module [args ...]")
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a library module as a script, like python -m")
    add_audit_options(p, None)
    p.add_argument("--max-steps", type=int, default=None, metavar="N",
                   help="stop recording after N recorded optimizer steps; the script keeps running (default 1; with --every, no limit)")
    p.add_argument("--every", type=int, default=None, metavar="N",
                   help="sample the whole run: record one optimizer step in N (the 1st, N+1st, ...); the steps between run "
                        "with nothing of the audit in their way")
    p.add_argument("-v", "--verbose", action="store_true", help="a failing script's traceback with library (torch) frames too")
    p.add_argument("command_line", nargs=argparse.REMAINDER, help="the script and its arguments")
    p.set_defaults(func=_cmd_run)


def add_audit_options(p: argparse.ArgumentParser, policy_default: str | None) -> None:
    p.add_argument("--policy", default=None,
                   help=f"the intended precision policy (default: {policy_default or 'the policy the script is observed to run'})")
    p.add_argument("--device-type", choices=("cpu", "cuda"), help="judge autocast-sensitive ops by this device's autocast lists (default: the device that ran)")
    p.add_argument("--fail-on", choices=("error", "warning", "info"), default="error", help="lowest severity that fails (default: error)")
    p.add_argument("--full", action="store_true", help="text: every table row (by default repeated layers are grouped, layers.0-31)")
    add_output_options(p)


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
    from ampdoctor.core import Severity

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
    check_writable(args.output)  # before a run that may take an hour, not after it
    try:
        with _script_stdout_to_stderr(args.format != "text" and args.output is None):
            result = run_command(target, rest, module=bool(args.module), policy=parse_policy(args.policy) if args.policy else None,
                                 max_steps=max_steps, every=args.every, verbose=args.verbose,
                                 device_type=None, target_device=args.device_type, fail_on=Severity.parse(args.fail_on), output=args.output)
    except ScriptNotFound as exc:
        raise UsageError(str(exc)) from None
    if result.report is not None:
        emit(result.report, args)
    return result.exit_code


def add_audit(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="audit one train step of a transformers model built from its config (random weights)")
    p.add_argument("--hf-config", required=True, metavar="CONFIG_JSON", help="a transformers config.json")
    p.add_argument("--fake", action="store_true", help="run on fake tensors: no memory for weights")
    p.add_argument("--seq-len", type=int, default=128, metavar="N", help="sequence length (default 128)")
    p.add_argument("--batch-size", type=int, default=1, metavar="N", help="batch size (default 1)")
    add_audit_options(p, AUDIT_POLICY)
    p.set_defaults(func=_cmd_audit)


AUDIT_POLICY = "bf16-mixed"  # what `ampdoctor audit` builds and judges the model by without --policy


def _cmd_audit(args: argparse.Namespace) -> int:
    require_torch("ampdoctor audit")
    from ampdoctor.audit.hf import ConfigError, audit_hf_config
    from ampdoctor.core import Severity

    if args.seq_len < 1 or args.batch_size < 1:
        raise UsageError("--seq-len and --batch-size must be at least 1")
    try:
        a = audit_hf_config(args.hf_config, policy=parse_policy(args.policy or AUDIT_POLICY), fake=args.fake, seq_len=args.seq_len,
                            batch_size=args.batch_size, target_device=args.device_type, reraise=False)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    report = a.report if args.policy else a.report.with_info(policy_source="audit-default")
    failed = a.exception is not None
    if failed:  # the step raised: the report diagnoses it, and the run ends as a failing script's does (exit 1)
        report = report.with_info(script_failed=True, exception=f"{type(a.exception).__name__}: {a.exception}")
    emit(report, args)
    return exit_code(report, Severity.parse(args.fail_on), program_code=1 if failed else 0)
