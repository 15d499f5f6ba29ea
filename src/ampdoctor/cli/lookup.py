"""The commands that look things up: `rules` (the catalog), `explain` (error text -> rules), `env` (this machine)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ampdoctor._requires import require_torch
from ampdoctor.cli.common import UsageError, add_output_options, emit_document, output
from ampdoctor.report import DOCUMENT, Candidates, formats, renderer, write_report


def add_rules(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rules", help="list the rule catalog, or show one rule")
    p.add_argument("rule", nargs="?", help="a rule name (grad-scaler-with-bf16) or id (AMP004)")
    add_output_options(p, formats(DOCUMENT))
    p.set_defaults(func=_cmd_rules)


def _cmd_rules(args: argparse.Namespace) -> int:
    from ampdoctor.core import catalog, get_rule
    from ampdoctor.core.docs import write_rule, write_rule_table
    from ampdoctor.report.envelopes import rules_document

    try:
        rules = [get_rule(args.rule)] if args.rule else list(catalog())
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    emit_document(args, lambda: rules_document(rules, single=bool(args.rule)),
                  lambda stream: write_rule(rules[0], stream) if args.rule else write_rule_table(rules, stream))
    return 0


def add_explain(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="explain an error message, traceback or training log")
    p.add_argument("text", nargs="*", help="the error text; '-' reads standard input")
    p.add_argument("--file", "-f", metavar="FILE", help="read the text (a log, a traceback) from FILE")
    p.add_argument("--limit", type=int, default=5, help="most candidates to show (default 5)")
    p.add_argument("--all", action="store_true", help="also the candidates that fit clearly worse than the best one, without --limit")
    add_output_options(p)
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

    if args.limit < 1:
        raise UsageError(f"--limit must be at least 1, not {args.limit}")
    text = _read_explain_input(args)
    if not text.strip():
        raise UsageError("the error text is empty")
    candidates = explain(text, limit=None if args.all else args.limit, weak=args.all)
    shown = {c.rule.id for c in candidates}
    hidden = sum(c.rule.id not in shown for c in explain(text, limit=None, weak=True))
    answer = Candidates(candidates, hidden, lambda: explain_findings(text, limit=args.limit))
    with output(args.output) as stream:
        renderer(args.format).render_candidates(answer, stream)
    # 0 only where a signature matched: rules that are merely the closest in wording are no diagnosis
    return 0 if any(c.basis == "signature" for c in candidates) else 1


def add_env(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("env", help="what this machine can do for mixed precision")
    add_output_options(p, formats(DOCUMENT))
    p.set_defaults(func=_cmd_env)


def _cmd_env(args: argparse.Namespace) -> int:
    require_torch("ampdoctor env")
    from ampdoctor.env import collect, env_findings, env_report
    from ampdoctor.report.envelopes import environment_document

    env = collect()
    emit_document(args, lambda: environment_document(env.to_dict(), env_findings(env)),
                  lambda stream: write_report(env_report(env).with_info(command=args.command), args.format, stream))
    return 0
