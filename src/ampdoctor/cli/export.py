"""`ampdoctor export`: the config fragment that makes a framework run a precision policy."""

from __future__ import annotations

import argparse
import sys

from ampdoctor.cli.common import later, output, parse_policy


def add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="print the config fragment that makes a framework run a precision policy")
    later(p, _arguments)  # its --to choices are the framework readers': imported only when `export` is used
    p.set_defaults(func=_cmd_export)


def _arguments(p: argparse.ArgumentParser) -> None:
    from ampdoctor.frameworks import TARGETS

    p.add_argument("--policy", required=True, metavar="POLICY", help="a preset (bf16-mixed) or a policy string (params=fp32,compute=bf16)")
    p.add_argument("--to", required=True, choices=TARGETS, help="the framework")
    p.add_argument("--output", "-o", metavar="FILE", help="write the fragment to FILE instead of stdout")


def _cmd_export(args: argparse.Namespace) -> int:
    from ampdoctor.frameworks import export

    policy = parse_policy(args.policy)
    result = export(policy, args.to, build=False)  # only the text is printed
    header = [f"# ampdoctor export --policy {args.policy} --to {args.to}: {policy}"]
    notes = [f"# cannot express: {note}" for note in result.cannot_express]
    with output(args.output) as stream:
        if result.syntax == "json":
            stream.write(result.text)  # JSON has no comments: the notes go to stderr
        else:
            stream.write("\n".join(header + notes) + "\n" + result.text)
    for note in result.cannot_express:
        print(f"ampdoctor: cannot express in {args.to}: {note}", file=sys.stderr)
    return 0
