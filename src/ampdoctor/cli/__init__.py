"""Command-line interface: argument parsing only; every command calls the library.

Exit codes follow ruff: 0 nothing at or above --fail-on, 1 findings, 2 usage error or unreadable input.
Each command is an `add_<name>(subparsers)` that registers its parser and a `_cmd_<name>(args) -> int`, in the
module of its group: `lookup` (rules, explain, env), `lint`, `audit` (run, audit), `numerics` (compare, rope),
`export`. Reports are written through the renderer registry (`ampdoctor.report.registry`), whose formats are the
`--format` choices.
"""

from __future__ import annotations

import argparse
import os
import sys

from ampdoctor._requires import MissingDependency
from ampdoctor._version import __version__
from ampdoctor.cli.audit import add_audit, add_run
from ampdoctor.cli.common import CommandParser, UsageError
from ampdoctor.cli.export import add_export
from ampdoctor.cli.lint import add_lint
from ampdoctor.cli.lookup import add_env, add_explain, add_rules
from ampdoctor.cli.numerics import add_compare, add_rope


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ampdoctor",
        description="Make BF16 mixed-precision training correct by construction, and diagnose it when it is not.",
    )
    parser.add_argument("--version", action="version", version=f"ampdoctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    for add in (add_lint, add_explain, add_rules, add_env, add_run, add_audit, add_compare, add_rope, add_export):
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
    except BrokenPipeError:
        # The reader went away (`ampdoctor rules --format json | head`): nothing more can be said to it. Point
        # stdout at /dev/null so that the interpreter's own flush at exit does not raise again, and end as a
        # process that SIGPIPE ended would.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


__all__ = ["UsageError", "build_parser", "main"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
